"""`make bench`: run the benchmarks, print one table, write bench/results.json."""

from __future__ import annotations

import argparse
import json
import platform
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import core
import ray_bench

RESULTS = Path(__file__).with_name("results.json")

# measure -> (how to read it from a mode's results, target text)
ROWS: list[tuple[str, Any, str]] = [
    ("breakpoint() -> listed, first", lambda r: r["listed_first"], "<= 250 ms"),
    ("breakpoint() -> listed, later", lambda r: r["listed_later"]["median"]
     if r["listed_later"] else None, "<= 20 ms"),
    ("connect -> stopped, first pause", lambda r: r["connect_to_stopped_first"], "<= 50 ms"),
    ("connect -> stopped, later pauses", lambda r: r["connect_to_stopped_later"]["median"]
     if r["connect_to_stopped_later"] else None, "<= 50 ms"),
    *[(f"{command} round trip (median)", lambda r, c=command: r[c]["median"], "<= 1 ms")
      for command in core.REQUESTS],
    ("stackTrace round trip (p95)", lambda r: r["stackTrace"]["p95"], ""),
    ("next -> stopped, 4 threads (median)", lambda r: r["next_to_stopped"]["median"], "<= 2 ms"),
    ("next -> stopped, 4 threads (p95)", lambda r: r["next_to_stopped"]["p95"], ""),
]


def milliseconds(value: float | None) -> str:
    return "-" if value is None else f"{value * 1000:.2f} ms"


def table(results: dict[str, dict[str, Any]]) -> str:
    header = ("measure", "raydebug (hub)", "direct+nodelay", "debugpy direct",
              "debugpy adapter (Ray)", "adapter/raydebug", "target")
    lines = [header]
    for name, read, target in ROWS:
        ours, nodelay, direct, adapter = (read(results[mode]) for mode in core.MODES)
        ratio = f"{adapter / ours:.1f}x" if ours and adapter else "-"
        lines.append((name, milliseconds(ours), milliseconds(nodelay), milliseconds(direct),
                      milliseconds(adapter), ratio, target))
    lines.append(("extra processes per paused worker",
                  *(str(results[m]["extra_processes"]) for m in core.MODES), "-", "0"))
    lines.append(("extra memory per paused worker",
                  *(f"{results[m]['extra_rss_mb']:.1f} MB" for m in core.MODES), "-",
                  "<= 25 MB"))
    widths = [max(len(row[i]) for row in lines) for i in range(len(header))]
    return "\n".join("  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True))
                     for row in lines)


def ray_table(results: dict[str, Any]) -> str:
    """raydebug vs Ray's built-in debugger on the same local Ray."""
    header = ("measure (local Ray)", "raydebug", "Ray built-in", "Ray/raydebug", "target")
    lines = [header]
    for name, read, target in ROWS:
        ours, theirs = read(results["raydebug"]), read(results["ray"])
        ratio = f"{theirs / ours:.1f}x" if ours and theirs else "-"
        lines.append((name, milliseconds(ours), milliseconds(theirs), ratio, target))
    lines.append(("extra processes per paused worker",
                  *(str(results[m]["extra_processes"]) for m in ("raydebug", "ray")), "-", "0"))
    lines.append(("extra memory per paused worker",
                  *(f"{results[m]['extra_rss_mb']:.1f} MB" for m in ("raydebug", "ray")),
                  "-", "<= 25 MB"))
    lines.append(("hub start (first breakpoint of a cluster)",
                  milliseconds(results["hub_start"]), "-", "-", "once"))
    flow = results["throughput"]
    spread = max(max(v) / min(v) for v in flow["seconds"].values())
    lines.append((f"task throughput, {flow['tasks']} no-op tasks", "enabled", "plain Ray",
                  f"{flow['ratio']:.2f}" + (" (noisy)" if spread > 1.2 else ""), ">= 0.98"))
    widths = [max(len(row[i]) for row in lines) for i in range(len(header))]
    return "\n".join("  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True))
                     for row in lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--requests", type=int, default=200)
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--no-ray", action="store_true", help="Skip the Ray comparison.")
    parser.add_argument("--only-ray", action="store_true", help="Only the Ray comparison.")
    args = parser.parse_args()
    started = time.time()
    results = None
    if not args.only_ray:
        results = core.run(args.requests, args.steps, args.rounds)
        print(table(results))
    ray_results = None
    if not args.no_ray:
        ray_results = ray_bench.run(args.requests, args.steps, min(args.rounds, 3))
        print()
        print(ray_table(ray_results))
    import debugpy

    RESULTS.write_text(json.dumps({
        "when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(started)),
        "machine": {"python": platform.python_version(), "platform": platform.platform(),
                    "cpus": __import__("os").cpu_count(), "debugpy": debugpy.__version__},
        "core": results,
        "ray": ray_results,
    }, indent=2))
    print(f"\nwritten to {RESULTS}")


if __name__ == "__main__":
    main()
