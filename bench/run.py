"""`make bench`: run the benchmarks, print the tables, write bench/results.json.

Sections: ``core`` (one plain process, raydebug vs stock debugpy), ``ray`` (a local Ray,
raydebug vs Ray's built-in debugger), ``scale`` (one hub with 1,000 paused sessions; a
killed worker leaving the list; a worker's speed after its debug session; 1,000 paused
processes in one group session beside child sessions), ``live`` (stacks
across 1,000 live links against py-spy; 10,000 links on one hub: ps, pause, memory),
``armed`` (armed cluster breakpoints and the ``raised`` filter in a Ray worker, 3.11 and 3.12),
``link`` (`raydebug link` of 20 running processes, beside ``debugpy --pid``), ``snapshots``
(a 20-frame traceback's capture; task throughput with snapshots on).
"""

from __future__ import annotations

import argparse
import importlib.metadata
import json
import os
import platform
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import armed_ray
import core
import group_scale
import link
import live_scale
import ray_bench
import scale
import snapshots
import speed
import speed_leave

RESULTS = Path(__file__).with_name("results.json")
SECTIONS = ("core", "ray", "scale", "live", "armed", "link", "snapshots")

# A measure read from a mode's results: a number, a Sample summary (median + spread), or None.
Reader = Callable[[dict[str, Any]], Any]

# measure -> (how to read it from a mode's results, target text)
ROWS: list[tuple[str, Reader, str]] = [
    ("breakpoint() -> listed, first", lambda r: r["listed_first"], "<= 250 ms"),
    ("breakpoint() -> listed, later", lambda r: r["listed_later"], "<= 20 ms"),
    ("connect -> stopped, first pause, client at once",
     lambda r: r["connect_to_stopped_first"], "<= 50 ms"),
    (f"connect -> stopped, first pause, client {core.READY_AFTER:g} s after",
     lambda r: r.get("connect_to_stopped_first_ready"), "<= 50 ms"),
    ("connect -> stopped, later pauses", lambda r: r["connect_to_stopped_later"], "<= 50 ms"),
    *[(f"{command} round trip (median)", lambda r, c=command: r[c], "<= 1 ms")
      for command in core.REQUESTS],
    ("stackTrace round trip (p95)", lambda r: r["stackTrace"]["p95"], ""),
    ("next -> stopped, 4 threads (median)", lambda r: r["next_to_stopped"], "<= 2 ms"),
    ("next -> stopped, 4 threads (p95)", lambda r: r["next_to_stopped"]["p95"], ""),
]


def median(value: Any) -> float | None:
    return value["median"] if isinstance(value, dict) else value


def milliseconds(value: Any) -> str:
    value = median(value)
    return "-" if value is None else f"{value * 1000:.2f} ms"


def noisy(cells: dict[str, Any]) -> str:
    """The "noisy" column: which of a row's samples spread more than core.NOISY (their
    interquartile range as a share of the median)."""
    return ", ".join(f"{name} IQR {value['spread']:.0%}" for name, value in cells.items()
                     if isinstance(value, dict) and value.get("noisy"))


def render(lines: list[tuple[str, ...]]) -> str:
    widths = [max(len(row[i]) for row in lines) for i in range(len(lines[0]))]
    return "\n".join("  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True))
                     .rstrip() for row in lines)


def table(results: dict[str, dict[str, Any]]) -> str:
    header = ("measure", "raydebug (hub)", "direct+nodelay", "debugpy direct",
              "debugpy adapter (Ray)", "adapter/raydebug", "target", "noisy")
    lines = [header]
    for name, read, target in ROWS:
        cells = {mode: read(results[mode]) for mode in core.MODES}
        ours, adapter = median(cells["raydebug"]), median(cells["adapter"])
        ratio = f"{adapter / ours:.1f}x" if ours and adapter else "-"
        lines.append((name, *(milliseconds(cell) for cell in cells.values()), ratio, target,
                      noisy(cells)))
    lines.append(("extra processes per paused worker",
                  *(str(results[m]["extra_processes"]) for m in core.MODES), "-", "0", ""))
    lines.append(("extra memory per paused worker",
                  *(f"{results[m]['extra_rss_mb']:.1f} MB" for m in core.MODES), "-",
                  "<= 25 MB", ""))
    return render(lines)


def ray_table(results: dict[str, Any]) -> str:
    """raydebug vs Ray's built-in debugger on the same local Ray."""
    header = ("measure (local Ray)", "raydebug", "Ray built-in", "Ray/raydebug", "target",
              "noisy")
    lines = [header]
    for name, read, target in [*ROWS, ("SIGKILL paused worker -> gone from list",
                                       lambda r: r["kill_to_gone"], "")]:
        cells = {mode: read(results[mode]) for mode in ("raydebug", "ray")}
        ours, theirs = median(cells["raydebug"]), median(cells["ray"])
        ratio = f"{theirs / ours:.1f}x" if ours and theirs else "-"
        lines.append((name, milliseconds(cells["raydebug"]), milliseconds(cells["ray"]), ratio,
                      target, noisy(cells)))
    lines.append(("extra processes per paused worker",
                  *(str(results[m]["extra_processes"]) for m in ("raydebug", "ray")), "-", "0",
                  ""))
    lines.append(("extra memory per paused worker",
                  *(f"{results[m]['extra_rss_mb']:.1f} MB" for m in ("raydebug", "ray")),
                  "-", "<= 25 MB", ""))
    lines.append(("hub start (first breakpoint of a cluster)",
                  milliseconds(results["hub_start"]), "-", "-", "once", ""))
    flow = results["throughput"]
    rounds = f"{flow['pairs']} x {flow['tasks']} no-op tasks, paired"
    lines.append((f"task throughput ({rounds})", "live link on", "plain Ray",
                  interval(flow["ratio"], flow["ci_low"], flow["ci_high"]), ">= 0.98",
                  wide(flow["ci_low"], flow["ci_high"], flow["worker_restarts"])))
    cpu = flow["cpu"]  # plain's CPU / live's, per round: the same tasks, less noise
    lines.append(("  CPU of the job (driver + workers), same rounds", "live link on",
                  "plain Ray", interval(cpu["median"], cpu["ci_low"], cpu["ci_high"]), "-",
                  wide(cpu["ci_low"], cpu["ci_high"], 0)))
    text = render(lines)
    if results["ray"]["kill_still_paused"]:
        text += ("\n(Ray: a killed worker stays in the dashboard's workers list with its "
                 "num_paused_threads; the time is until its is_alive turns false)")
    return text


def interval(ratio: float, low: float, high: float) -> str:
    """A paired ratio and its bootstrap 95% interval."""
    return f"{ratio:.3f} [{low:.3f}, {high:.3f}]"


def wide(low: float, high: float, restarts: int) -> str:
    """The "noisy" cell of a paired ratio: its interval wider than +-2% (the throughput
    target's margin), or rounds in which a job had to start a worker."""
    notes = [f"95% CI +-{(high - low) / 2:.1%}"] if (high - low) / 2 > 0.02 else []
    if restarts:
        notes.append(f"rounds with a new worker: {restarts}")
    return ", ".join(notes)


def scale_table(results: dict[str, Any]) -> str:
    """One hub with many paused sessions; a worker's speed after its session."""
    at = results["scale"]
    header = ("measure (one hub)", "raydebug", "baseline", "target", "noisy")
    rate = at["registration_rate"]
    lines = [header, (
        f"register {at['sessions']:,} paused sessions", f"{rate['median']:,.0f} sessions/s",
        "n/a", "-", noisy({"raydebug": rate}))]
    for name, key, target in (
            (f"list {at['sessions']:,}: GET /api/sessions", "list_http", "<= 100 ms"),
            (f"list {at['sessions']:,}: raydebug list --json", "list_cli", "<= 100 ms"),
            (f"attach -> stopped + stackTrace among {at['sessions']:,}", "attach_to_stack",
             "<= 50 ms"),
            ("SIGKILL paused worker -> gone from list", "kill_to_gone", "-")):
        lines.append((name, milliseconds(at[key]), "n/a", target, noisy({"raydebug": at[key]})))
    lines.append((f"hub RSS: idle / {at['sessions']:,} sessions (peak)",
                  f"{at['hub_rss_mb_idle']:.0f} / {at['hub_rss_mb_full']:.0f} MB "
                  f"({at['hub_peak_rss_mb']:.0f})", "n/a", "<= 150 MB", ""))
    fast = results["speed"]

    def ratios(mode: str) -> str:
        return " / ".join(f"{fast[mode][thread]['median']:.2f}" for thread in ("main", "thread"))

    lines.append(("speed after detach / before: main / thread", ratios("raydebug"),
                  f"{ratios('adapter')} (debugpy adapter, as Ray)", ">= 0.95",
                  noisy({f"{mode} {thread}": fast[mode][thread]
                         for mode in ("raydebug", "adapter") for thread in ("main", "thread")})))
    text = render(lines)
    if fast["failed_attaches"]:
        text += f"\n(speed: {len(fast['failed_attaches'])} attach(es) failed and were retried)"
    return text


def versions() -> dict[str, Any]:
    found: dict[str, Any] = {"python": platform.python_version(),
                             "platform": platform.platform(), "cpus": os.cpu_count()}
    for package in ("raydebug", "debugpy", "ray"):
        try:
            found[package] = importlib.metadata.version(package)
        except importlib.metadata.PackageNotFoundError:
            found[package] = None
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--requests", type=int, default=200,
                        help="Samples per request type (fewer once 2 s are spent).")
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--sessions", type=int, default=1000, help="Sessions of the scale test.")
    parser.add_argument("--only", default=",".join(SECTIONS),
                        help=f"Comma-separated sections to run, of {', '.join(SECTIONS)}.")
    parser.add_argument("--no-ray", action="store_true", help="Skip the Ray comparison.")
    parser.add_argument("--only-ray", action="store_true", help="Only the Ray comparison.")
    parser.add_argument("--only-scale", action="store_true",
                        help="Only the scale section (measures 6-8 without Ray).")
    args = parser.parse_args()
    ray_bench.compile_raydebug()
    sections = set(args.only.split(","))
    if args.no_ray:
        sections.discard("ray")
    if args.only_ray:
        sections = {"ray"}
    if args.only_scale:
        sections = {"scale"}
    started = time.time()
    load_before = os.getloadavg()
    results: dict[str, Any] = {"core": None, "ray": None, "scale": None, "live": None,
                               "armed": None, "link": None, "snapshots": None}
    if "core" in sections:
        results["core"] = core.run(args.requests, args.steps, args.rounds)
        print(table(results["core"]), "\n")
    if "ray" in sections:
        results["ray"] = ray_bench.run(args.requests, args.steps, min(args.rounds, 3))
        print(ray_table(results["ray"]), "\n")
    if "scale" in sections:
        print(f"measuring a hub with {args.sessions} sessions...", file=sys.stderr, flush=True)
        results["scale"] = {"scale": scale.run(args.sessions)}
        hub, hub_log = core.start_logged_hub()
        try:
            results["scale"]["speed"] = speed.run(hub, hub_log=hub_log)
            results["scale"]["leave"] = speed_leave.run(hub, hub_log)
        finally:
            hub.close()
        print(scale_table(results["scale"]), "\n")
        print(speed_leave.table(results["scale"]["leave"]), "\n")
        results["scale"]["group"] = group_scale.run(args.sessions)
        print(group_scale.table(results["scale"]["group"]), "\n")
    if "live" in sections:
        print("measuring 1,000 then 10,000 live links on one hub...", file=sys.stderr,
              flush=True)
        results["live"] = live_scale.run()
        print(live_scale.table(results["live"]), "\n")
    if "armed" in sections:
        print("measuring armed breakpoints in Ray workers (3.11, 3.12)...", file=sys.stderr,
              flush=True)
        results["armed"] = armed_ray.run()
        print(armed_ray.table(results["armed"]), "\n")
    if "link" in sections:
        print("measuring raydebug link (20 processes, a busy loop's gap, debugpy --pid)...",
              file=sys.stderr, flush=True)
        results["link"] = link.run()
        print(link.table(results["link"]), "\n")
    if "snapshots" in sections:
        print("measuring a snapshot's capture, and task throughput with snapshots on...",
              file=sys.stderr, flush=True)
        results["snapshots"] = snapshots.run(with_ray=not args.no_ray)
        print(snapshots.table(results["snapshots"]), "\n")
    seconds = time.time() - started
    print(f"{seconds / 60:.1f} min; load average {load_before[0]:.1f} before, "
          f"{os.getloadavg()[0]:.1f} after (on {os.cpu_count()} CPUs)")
    RESULTS.write_text(json.dumps({
        "when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(started)),
        "seconds": seconds,
        "machine": {**versions(), "load_average_before": load_before,
                    "load_average_after": os.getloadavg()},
        **results,
    }, indent=2))
    print(f"written to {RESULTS}")


if __name__ == "__main__":
    main()
