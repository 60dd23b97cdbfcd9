"""Cost of an armed cluster breakpoint for code elsewhere (docs/design.md#armed).

Call-heavy code (``fib(23)``) in a file without breakpoints, while a breakpoint is armed in
another file: raydebug's arm on each Python given (the running one by default; on 3.10/3.11
the rewritten code of agent/armed/code.py, and beside it the trace function alone, as
``RAYDEBUG_ARMED_BACKEND=trace`` keeps it), and, as the anchor, stock debugpy listening
(in-process adapter, no client: its tracing is what a listening debugpy costs; a client's
breakpoint adds to it). Prints speed ratios to unarmed (the best of 24 calls each), all in
one run, and what one arm costs (ms, with the heap's object count: ``import ray`` first
where Ray is installed, a Ray worker's heap):

    python bench/armed_speed.py [PYTHON ...]   # each needs debugpy; raydebug from src/
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

SOURCE = Path(__file__).resolve().parents[1] / "src"
ROUNDS = 8  # turns of unarmed / armed runs, 3 calls each: the best of each kind counts

PROBE = textwrap.dedent('''
    import os, sys, tempfile, time
    sys.path.insert(0, SOURCE)
    here = tempfile.mkdtemp()
    with open(os.path.join(here, "elsewhere.py"), "w") as f:
        f.write("def fib(n):\\n    return n if n < 2 else fib(n - 1) + fib(n - 2)\\n")
    with open(os.path.join(here, "armed.py"), "w") as f:
        f.write("def work():\\n    return 1\\n")
    sys.path.insert(0, here)
    import elsewhere, armed
    if MODE == "arm-cost":
        try:
            import ray  # a Ray worker's heap, near enough
        except ImportError:
            pass

    def best(runs):
        times = []
        for _ in range(runs):
            start = time.perf_counter(); elsewhere.fib(23)
            times.append(time.perf_counter() - start)
        return min(times)

    if MODE == "arm-cost":
        import gc
        from raydebug.agent.armed.breakpoints import ArmedBreakpoints, BreakpointSet
        arm = ArmedBreakpoints(on_hit=lambda frame: None, on_log=lambda text, frame: None)
        wanted = BreakpointSet.from_wire({"sources": [{"path": armed.__file__,
                                                       "breakpoints": [{"line": 2}]}]})
        costs = []
        for _ in range(5):
            start = time.perf_counter(); arm.arm(wanted); costs.append(time.perf_counter() - start)
            arm.disarm()
        print(f"{min(costs) * 1000:.0f} ms/{len(gc.get_objects()) // 1000}k")
        raise SystemExit
    if MODE.startswith("raydebug"):  # unarmed and armed in turns: a loaded machine hits both alike
        from raydebug.agent.armed.breakpoints import ArmedBreakpoints, BreakpointSet
        arm = ArmedBreakpoints(on_hit=lambda frame: None, on_log=lambda text, frame: None)
        wanted = BreakpointSet.from_wire({"sources": [{"path": armed.__file__,
                                                       "breakpoints": [{"line": 2}]}]})
        bare = armed_time = float("inf")
        for _ in range(ROUNDS):
            bare = min(bare, best(3))
            arm.arm(wanted)
            armed_time = min(armed_time, best(3))
            arm.disarm()
    else:  # debugpy cannot stop listening: unarmed first
        import debugpy
        bare = best(3 * ROUNDS)
        debugpy.listen(("127.0.0.1", 0), in_process_debug_adapter=True)
        armed_time = best(3 * ROUNDS)
    print(f"{bare / armed_time:.2f}")
''')


def ratio(python: str, mode: str) -> str:
    code = f"SOURCE = {str(SOURCE)!r}\nMODE = {mode!r}\nROUNDS = {ROUNDS}\n" + PROBE
    env = {**os.environ, "RAYDEBUG_ARMED_BACKEND": "trace" if mode == "raydebug-trace" else ""}
    done = subprocess.run([python, "-c", code], capture_output=True, text=True, timeout=300,
                          env=env)
    return done.stdout.strip() or f"failed: {done.stderr.strip().splitlines()[-1:]}"


def main() -> None:
    pythons = sys.argv[1:] or [sys.executable]
    print(f"{'python':<44} {'raydebug armed':>14} {'trace fn alone':>14} "
          f"{'debugpy listening':>17} {'one arm/heap':>13}")
    for python in pythons:
        version = subprocess.run([python, "-c", "import sys; print(sys.version.split()[0])"],
                                 capture_output=True, text=True).stdout.strip()
        trace_alone = ratio(python, "raydebug-trace") if version < "3.12" else "-"
        print(f"{python[-30:] + ' (' + version + ')':<44} {ratio(python, 'raydebug'):>14} "
              f"{trace_alone:>14} {ratio(python, 'debugpy'):>17} "
              f"{ratio(python, 'arm-cost'):>13}", flush=True)
    print("goals: >= 0.95 on 3.12+, >= 0.7 on 3.11 (ratios to unarmed; 1.0 = no cost)")


if __name__ == "__main__":
    main()
