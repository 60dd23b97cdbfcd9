"""Speed while a client stays attached after ``continue``, and after it leaves.

Per Python (the venv's, and 3.12 where pydevd uses sys.monitoring) and per way of leaving:

- ``disconnect``: continue, then a clean ``disconnect``;
- ``close``: continue, then the connection closes with no ``disconnect`` (an IDE window
  closed, a laptop slept);
- ``stay``: continue, stay attached for STAY seconds (no breakpoint set), then disconnect.

Measures, from the process's own timing of ``fib(20)`` (bench/speed_leave_target.py):
``gone_to_full_speed`` (client gone -> the first call from which the next five run within
1.5x of untraced), ``longest_stall`` (the longest a 1 ms sleep of another thread took, from
the leaving to 0.5 s after: a pause of every thread while tracing is removed shows here),
and for ``stay`` ``attached_speed`` (untraced time / median call time while attached).
"""

from __future__ import annotations

import asyncio
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import core
from devtools.pythons import find_python, venv_with_debugpy
from raydebug.client.dap import DapClient

TARGET = Path(__file__).with_name("speed_leave_target.py")
SOURCE = Path(__file__).resolve().parents[1] / "src"
WAYS = ("disconnect", "close", "stay")
STAY = 1.0
RUN_FOR = 2.0  # seconds the process times itself after the resume


def python_312() -> str | None:
    """A 3.12 venv with this venv's debugpy (raydebug comes from the source tree)."""
    found = find_python("3.12")
    if found is None:
        return None
    return venv_with_debugpy(found)


async def continue_then_leave(hub: Any, way: str) -> tuple[float, float]:
    """Attach to the next pause, continue, leave ``way``; (continued, left) wall times."""
    client = await DapClient.connect(*hub.client)
    await client.initialize()
    stopped = await client.attach(timeout=60)
    await client.request("continue", {"threadId": stopped.body["threadId"]})
    continued = time.time()
    if way == "stay":
        await asyncio.sleep(STAY)
    left = time.time()
    if way != "close":
        await client.request("disconnect", {})
        left = time.time()  # the hub notices the client has gone once it closes, below
    await client.close()
    return continued, left


def analyse(result: dict[str, Any], continued: float, left: float) -> dict[str, Any]:
    baseline = result["baseline"]
    calls = [(end, took) for end, took in result["calls"] if end >= left]
    full = None
    for index, (end, took) in enumerate(calls):
        following = [t for _, t in calls[index:index + 5]]
        if len(following) == 5 and statistics.median(following) <= 1.5 * baseline:
            full = max(0.0, end - took - left)  # when that call started
            break
    ticks = [length for end, length in result["ticks"] if left <= end <= left + 0.5]
    attached = [took for end, took in result["calls"] if continued + 0.2 <= end <= left]
    idle = [length for _, length in result["idle_ticks"]]
    return {
        "gone_to_full_speed": full,
        "longest_stall": max(ticks) - 0.001 if ticks else None,
        "longest_stall_idle": max(idle) - 0.001 if idle else None,
        "attached_speed": baseline / statistics.median(attached) if attached else None,
    }


def run_once(hub: Any, hub_log: core.HubLog, python: str, way: str) -> dict[str, Any]:
    err_path = core.worker_stderr_file(f"leave-{way}")
    with err_path.open("w") as err:
        proc = subprocess.Popen([python, str(TARGET), str(RUN_FOR + (STAY if way == "stay"
                                                                     else 0))],
                                env=hub.env(PYTHONPATH=str(SOURCE)), stdout=subprocess.PIPE,
                                stderr=err, text=True)
    failed = True
    try:
        continued, left = asyncio.run(asyncio.wait_for(continue_then_leave(hub, way), 120))
        out, _ = proc.communicate(timeout=120)
        measured = analyse(json.loads(out.splitlines()[-1]), continued, left)
        failed = False
        return measured
    finally:
        core.stop(proc)
        if failed:
            core.report_failure(f"speed after leaving ({way})", err_path, hub_log)
        err_path.unlink(missing_ok=True)


def run(hub: Any, hub_log: core.HubLog, repeats: int = 3) -> dict[str, Any]:
    """Per Python and way of leaving: medians over ``repeats`` processes."""
    pythons = {f"{sys.version_info.major}.{sys.version_info.minor}": sys.executable}
    other = python_312()
    if other is not None:
        pythons["3.12"] = other
    results: dict[str, Any] = {}
    for version, python in pythons.items():
        for way in WAYS:
            print(f"measuring speed after leaving ({version}, {way})...", file=sys.stderr,
                  flush=True)
            runs = [run_once(hub, hub_log, python, way) for _ in range(repeats)]
            results[f"{version} {way}"] = {
                key: core.Sample([r[key] for r in runs if r[key] is not None]).summary()
                if any(r[key] is not None for r in runs) else None
                for key in ("gone_to_full_speed", "longest_stall", "longest_stall_idle",
                            "attached_speed")}
    return results


def table(results: dict[str, Any]) -> str:
    lines = [("measure", *results)]

    def cell(value: Any, scale: float, unit: str) -> str:
        digits = 0 if unit == " ms" else 2
        return "-" if value is None else f"{value['median'] * scale:.{digits}f}{unit}"

    for name, key, scale, unit in (
            ("client gone -> full speed", "gone_to_full_speed", 1000, " ms"),
            ("longest stall while untracing", "longest_stall", 1000, " ms"),
            ("(longest stall of the idle process)", "longest_stall_idle", 1000, " ms"),
            ("speed while attached after continue", "attached_speed", 1, "")):
        lines.append((name, *(cell(r[key], scale, unit) for r in results.values())))
    widths = [max(len(row[i]) for row in lines) for i in range(len(lines[0]))]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip()
                     for row in lines)


if __name__ == "__main__":
    hub, hub_log = core.start_logged_hub()
    try:
        measured = run(hub, hub_log)
    finally:
        hub.close()
    print(table(measured))
    print(json.dumps(measured, indent=1))
