"""Cost of an armed cluster breakpoint for code elsewhere (docs/design.md#armed).

Call-heavy code (``fib(23)``) in a file without breakpoints, while a breakpoint is armed in
another file: raydebug's arm on each Python given (the running one by default), and, as the
anchor, stock debugpy listening (in-process adapter, no client: its tracing is what a
listening debugpy costs; a client's breakpoint adds to it). Prints speed ratios to unarmed
(the best of 24 calls each), all in one run:

    python bench/armed_speed.py [PYTHON ...]   # each needs debugpy; raydebug from src/
"""

from __future__ import annotations

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

    def best(runs):
        times = []
        for _ in range(runs):
            start = time.perf_counter(); elsewhere.fib(23)
            times.append(time.perf_counter() - start)
        return min(times)

    if MODE == "raydebug":  # unarmed and armed in turns: a loaded machine hits both alike
        from raydebug.agent.armed_breakpoints import ArmedBreakpoints, BreakpointSet
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
    done = subprocess.run([python, "-c", code], capture_output=True, text=True, timeout=300)
    return done.stdout.strip() or f"failed: {done.stderr.strip().splitlines()[-1:]}"


def main() -> None:
    pythons = sys.argv[1:] or [sys.executable]
    print(f"{'python':<40} {'raydebug armed':>15} {'debugpy listening':>18}")
    for python in pythons:
        version = subprocess.run([python, "-c", "import sys; print(sys.version.split()[0])"],
                                 capture_output=True, text=True).stdout.strip()
        print(f"{python + ' (' + version + ')':<40} {ratio(python, 'raydebug'):>15} "
              f"{ratio(python, 'debugpy'):>18}", flush=True)
    print("goals: >= 0.95 on 3.12+, >= 0.7 on 3.11 (ratios to unarmed; 1.0 = no cost)")


if __name__ == "__main__":
    main()
