"""Cost of armed cluster breakpoints in a Ray worker, Python 3.11 and 3.12 side by side
(docs/design.md#armed).

In one Ray actor (a worker of a local ``ray.init``), in turns so that load hits both alike:
``fib(23)`` in a file without breakpoints, unarmed and while a line breakpoint is armed in
another file; the same with only the ``raised`` filter set (no raise: what the filter costs
code that does not raise); and a loop that raises and catches, in the standard library
(``os.environ.get`` of a missing name) and in the user's code, unarmed and with ``raised``
set (a raise in the user's code would stop: there the pause is answered at once, so what is
measured is the report of each raise, not a pause).
Prints ratios to unarmed (best of 24 runs each; 1.0 = no cost):

    python bench/armed_ray.py            # this venv's Python, and 3.12 (devtools.pythons)
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from devtools.pythons import ray_venv  # noqa: E402

ROUNDS = 8  # turns of unarmed / armed runs, 3 each: the best of each kind counts

DRIVER = textwrap.dedent('''
    import json, os, sys, tempfile, time
    import ray

    ray.init(address="local", num_cpus=1, include_dashboard=False, log_to_driver=False)

    @ray.remote(num_cpus=0)
    class Probe:
        def measure(self, rounds):
            here = tempfile.mkdtemp()
            with open(os.path.join(here, "elsewhere.py"), "w") as f:
                f.write("def fib(n):\\n    return n if n < 2 else fib(n - 1) + fib(n - 2)\\n"
                        "def raising(n):\\n    for i in range(n):\\n        try:\\n"
                        "            raise ValueError(i)\\n        except ValueError:\\n"
                        "            pass\\n")
            with open(os.path.join(here, "armed.py"), "w") as f:
                f.write("def work():\\n    return 1\\n")
            sys.path.insert(0, here)
            import armed, elsewhere
            from raydebug.agent.armed.breakpoints import ArmedBreakpoints, BreakpointSet

            def library_raising(n):
                for _ in range(n):
                    os.environ.get("RAYDEBUG_BENCH_NO_SUCH_NAME")  # KeyError inside os

            work = {"fib(23)": lambda: elsewhere.fib(23),
                    "raise+catch, library": lambda: library_raising(20_000),
                    "raise+catch, user": lambda: elsewhere.raising(20_000)}
            line = {"sources": [{"path": armed.__file__, "breakpoints": [{"line": 2}]}]}
            sets = {"line breakpoint elsewhere": BreakpointSet.from_wire(line),
                    "raised filter": BreakpointSet.from_wire({"exceptions": ["raised"]})}
            arm = ArmedBreakpoints(on_hit=lambda frame: None, on_log=lambda text, frame: None,
                                   on_raised=lambda frame, exception, traceback: None)

            def best(run):
                times = []
                for _ in range(3):
                    start = time.perf_counter(); run()
                    times.append(time.perf_counter() - start)
                return min(times)

            ratios = {}
            for set_name, wanted in sets.items():
                for name, run in work.items():
                    if set_name.startswith("line") and name != "fib(23)":
                        continue
                    bare = armed_time = float("inf")
                    for _ in range(rounds):
                        bare = min(bare, best(run))
                        arm.arm(wanted)
                        armed_time = min(armed_time, best(run))
                        arm.disarm()
                    ratios[f"{name}, {set_name}"] = round(bare / armed_time, 2)
            return {"python": sys.version.split()[0], "ratios": ratios}

    print("measured", json.dumps(ray.get(Probe.remote().measure.remote(int(sys.argv[1])))))
    ray.shutdown()
''')


def measure(python: str, rounds: int = ROUNDS) -> dict[str, Any]:
    """One Ray of ``python`` (which needs ray, debugpy and raydebug), its actor's ratios."""
    done = subprocess.run([python, "-c", DRIVER, str(rounds)], capture_output=True,
                          text=True, timeout=900, env={"PATH": "/usr/bin:/bin",
                                                       "RAY_USAGE_STATS_ENABLED": "0"})
    for line in done.stdout.splitlines():
        if line.startswith("measured "):
            result: dict[str, Any] = json.loads(line.split(" ", 1)[1])
            return result
    return {"python": python, "error": (done.stderr.strip().splitlines() or ["?"])[-1]}


def run(rounds: int = ROUNDS) -> list[dict[str, Any]]:
    """This venv's Python and 3.12 (its venv built once if need be), in one run."""
    pythons = [sys.executable]
    other = ray_venv("3.12")
    if other is not None and sys.version_info[:2] != (3, 12):
        pythons.append(other)
    return [measure(python, rounds) for python in pythons]


def table(results: list[dict[str, Any]]) -> str:
    names = sorted({name for r in results for name in r.get("ratios", {})})
    lines = [f"{'armed in a Ray worker (ratio to unarmed)':<58}"
             + "".join(f"{r['python']:>10}" for r in results)]
    for name in names:
        lines.append(f"{name:<58}" + "".join(
            f"{r.get('ratios', {}).get(name, '-')!s:>10}" for r in results))
    for r in results:
        if "error" in r:
            lines.append(f"{r['python']}: failed: {r['error']}")
    lines.append("goals: line breakpoint elsewhere >= 0.95 on 3.12, >= 0.7 on 3.11")
    return "\n".join(lines)


if __name__ == "__main__":
    print(table(run()))
