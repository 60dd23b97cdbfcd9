"""What snapshots cost: one capture, and a job that never fails with them on.

- *capture*: a 20-frame traceback whose frames hold typical locals (numbers, short strings,
  a config dict two levels deep, a list of 200 floats, a dataclass-like object, a module, a
  function), captured as ``raydebug run --snapshots`` captures a failure on the failing
  thread (:func:`raydebug.snapshots.capture.exception_snapshot_json`), against
  ``traceback.format_exception`` of the same exception (what Ray and Python do with every
  failure anyway); the medians of many runs, alternated; the snapshot's size, and the
  encoding of its control message, which the link thread does afterwards;
- *throughput*: no-op Ray tasks of a job under ``raydebug.runtime_env(snapshots=True)``
  against the same job without snapshots (raydebug's default, live), interleaved on one local
  Ray (``ray_bench.interleaved_throughput``: the median of bracketed per-round ratios, wall
  time and CPU, with a bootstrap 95% interval). Snapshots on adds nothing to a task that
  does not fail (Ray calls raydebug's hook only on an exception), so the goal is 1.0
  (>= 0.99).

    .venv/bin/python bench/snapshots.py [--captures 300] [--pairs 200] [--no-ray]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
import traceback
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import ray_bench
from raydebug.protocol.control import SnapshotTaken, encode_control
from raydebug.snapshots.capture import exception_snapshot_json

FRAMES = 20
CAPTURE_GOAL_MS = 5.0
THROUGHPUT_GOAL = 0.99


class Layer:
    """An object with a few attributes, as a model's layer is to a repr."""

    def __init__(self, units: int) -> None:
        self.units = units
        self.activation = "relu"
        self.weights_shape = (units, units)


def failing(depth: int, config: dict[str, Any]) -> None:
    """Recurse ``depth`` frames, each with typical locals, then raise."""
    step = FRAMES - depth
    name = f"stage-{step}"
    losses = [0.1 * i for i in range(200)]
    layer = Layer(step + 8)
    tag, ratio, done = "train", step / FRAMES, False
    helpers = (json, failing)
    if depth <= 1:
        raise ValueError(f"loss diverged at {name}: {losses[-1]:.2f} {ratio} {done}")
    failing(depth - 1, config)
    del tag, layer, helpers


def a_failure() -> BaseException:
    config = {"lr": 3e-4, "layers": [{"units": 64, "act": "relu"}, {"units": 32}],
              "data": {"path": "/data/train", "shuffle": True}, "seed": 7}
    try:
        failing(FRAMES - 1, config)  # this frame and 19 more: 20 in the traceback
    except ValueError as error:
        return error
    raise AssertionError("it did not fail")


def capture_cost(count: int) -> dict[str, Any]:
    """Capture + encode against ``format_exception``, alternated, ``count`` of each."""
    error = a_failure()
    process = {"pid": os.getpid(), "host": "bench", "labels": {"rank": "0"}}
    captured: list[float] = []
    formatted: list[float] = []
    encoded: list[float] = []
    size = frames = 0
    for _ in range(count):
        started = time.perf_counter()
        snapshot = exception_snapshot_json(error, process)
        captured.append(time.perf_counter() - started)
        started = time.perf_counter()
        size = len(encode_control(SnapshotTaken(snapshot=snapshot)))
        encoded.append(time.perf_counter() - started)
        frames = len(snapshot["frames"])
        started = time.perf_counter()
        traceback.format_exception(type(error), error, error.__traceback__)
        formatted.append(time.perf_counter() - started)
    capture_ms = statistics.median(captured) * 1000
    format_ms = statistics.median(formatted) * 1000
    return {"frames": frames, "bytes": size, "capture_ms": capture_ms,
            "capture_p95_ms": sorted(captured)[int(count * 0.95)] * 1000,
            "encode_ms": statistics.median(encoded) * 1000,
            "format_exception_ms": format_ms, "ratio": capture_ms / format_ms,
            "goal_ms": CAPTURE_GOAL_MS}


def throughput(pairs: int, tasks: int = ray_bench.ROUND_TASKS) -> dict[str, Any]:
    """No-op task throughput, snapshots on against off (both live), interleaved."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from live_overhead import ENV, local_cluster

    os.environ.update(ENV)
    cluster = local_cluster(keep_idle_workers=True)
    try:
        flow = ray_bench.interleaved_throughput(cluster.address, ("live", "snapshots"),
                                                pairs, tasks)
    finally:
        cluster.shutdown()
    return {"wall": flow["snapshots_vs_live"], "cpu": flow["snapshots_vs_live_cpu"],
            "pairs": pairs, "tasks": tasks, "goal": THROUGHPUT_GOAL}


def run(captures: int = 300, pairs: int = 200, with_ray: bool = True) -> dict[str, Any]:
    results: dict[str, Any] = {"capture": capture_cost(captures)}
    if with_ray:
        results["throughput"] = throughput(pairs)
    return results


def table(results: dict[str, Any]) -> str:
    capture = results["capture"]
    lines = [("measure", "raydebug", "baseline", "ratio", "goal"),
             (f"capture, {capture['frames']}-frame traceback (median)",
              f"{capture['capture_ms']:.2f} ms", f"{capture['format_exception_ms']:.2f} ms "
              "(format_exception)", f"{capture['ratio']:.1f}x",
              f"<= {capture['goal_ms']:g} ms"),
             ("capture (p95)", f"{capture['capture_p95_ms']:.2f} ms", "", "", ""),
             ("its encoding, on the link thread", f"{capture['encode_ms']:.2f} ms", "", "",
              ""),
             ("snapshot size", f"{capture['bytes'] / 1000:.0f} kB", "", "", "<= 1000 kB")]
    if "throughput" in results:
        flow = results["throughput"]
        for name in ("wall", "cpu"):
            ratio = flow[name]
            lines.append((f"task throughput, snapshots on ({name})",
                          f"{ratio['median']:.3f} of off",
                          f"95% CI {ratio['ci_low']:.3f}-{ratio['ci_high']:.3f}", "",
                          f">= {flow['goal']:g}"))
    widths = [max(len(row[i]) for row in lines) for i in range(len(lines[0]))]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip()
                     for row in lines)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--captures", type=int, default=300)
    parser.add_argument("--pairs", type=int, default=200)
    parser.add_argument("--no-ray", action="store_true", help="Only the capture's cost.")
    args = parser.parse_args()
    measured = run(args.captures, args.pairs, not args.no_ray)
    print(table(measured))
    print(json.dumps(measured, indent=1))
