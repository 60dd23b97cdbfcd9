"""Cost of an armed cluster breakpoint for code elsewhere (docs/design.md#armed).

Call-heavy code (``fib(23)``) in a file without breakpoints, while a breakpoint is armed in
another file: raydebug's arm on each Python given (the running one by default), and, as the
anchor, stock debugpy listening (in-process adapter, no client: its tracing is what a
listening debugpy costs; a client's breakpoint adds to it). Prints speed ratios to unarmed
(best of 7 runs each), all in one run:

    python bench/armed_speed.py [PYTHON ...]   # each needs debugpy; raydebug from src/
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

SOURCE = Path(__file__).resolve().parents[1] / "src"

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

    def best():
        times = []
        for _ in range(7):
            start = time.perf_counter(); elsewhere.fib(23)
            times.append(time.perf_counter() - start)
        return min(times)

    bare = best()
    if MODE == "raydebug":
        from raydebug.agent.armed_breakpoints import ArmedBreakpoints, BreakpointSet
        arm = ArmedBreakpoints(on_hit=lambda frame: None, on_log=lambda text, frame: None)
        arm.arm(BreakpointSet.from_wire({"sources": [{"path": armed.__file__,
                                                      "breakpoints": [{"line": 2}]}]}))
    else:
        import debugpy
        debugpy.listen(("127.0.0.1", 0), in_process_debug_adapter=True)
    print(f"{bare / best():.2f}")
''')


def ratio(python: str, mode: str) -> str:
    code = f"SOURCE = {str(SOURCE)!r}\nMODE = {mode!r}\n" + PROBE
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
