"""Reading a snapshot: the hub's read-only session against a paused process's, in one run.

One script recurses 20 frames, each with typical locals (numbers, a string, a config dict
two levels deep, a list of 200 floats, an object), and at the bottom either raises under
``RAYDEBUG_SNAPSHOTS=1`` (a snapshot: the process is gone when it is read) or calls
``breakpoint()`` (a session: pydevd answers through the hub). Through the same hub, a
``DapClient`` times connect -> ``stopped`` and then each request a reader makes
(``stackTrace``, ``scopes``, ``variables``, ``evaluate`` of an index path), the medians of
many; the ratio is the snapshot's time over the session's. The hub answers a snapshot's
requests itself, so each should be well under the session's (target for any request
through the hub: <= 1 ms).

    .venv/bin/python bench/snapshot_view.py [--requests 300]
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
import core
from devtools.processes import HubProcess, finish, start_hub, write_script
from raydebug.client.dap import DapClient

SCRIPT = """
import sys

class Layer:
    def __init__(self, units):
        self.units = units
        self.activation = "relu"

def descend(depth, config):
    losses = [0.1 * i for i in range(200)]
    layer, name, ratio = Layer(depth + 8), f"stage-{depth}", depth / 20
    if depth == 0:
        if sys.argv[1] == "pause":
            breakpoint()
        raise ValueError(f"bad stage {name}")
    descend(depth - 1, config)

descend(19, {"layers": [{"width": 8, "act": "relu"}, {"width": 4}], "lr": 0.1})
"""
PATH = "config['layers'][0]['width']"


async def measure(hub: HubProcess, target: str, requests: int) -> dict[str, Any]:
    """Attach to ``target`` (a session or snapshot id) and time the reader's requests."""
    started = time.perf_counter()
    client = await DapClient.connect(*hub.client)
    await client.initialize()
    stopped = await client.attach(target)
    results: dict[str, Any] = {"connect_to_stopped": time.perf_counter() - started}
    thread_id = stopped.body["threadId"]
    frames = (await client.request("stackTrace", {"threadId": thread_id}))["stackFrames"]
    frame = frames[0]
    scopes = (await client.request("scopes", {"frameId": frame["id"]}))["scopes"]
    arguments = {
        "stackTrace": {"threadId": thread_id},
        "scopes": {"frameId": frame["id"]},
        "variables": {"variablesReference": scopes[0]["variablesReference"]},
        "evaluate": {"expression": PATH, "frameId": frame["id"], "context": "repl"},
    }
    for command, given in arguments.items():
        results[command] = await core.timed(
            requests, lambda c=command, a=given: client.request(c, a))
    results["frames"] = len(frames)
    await client.request("disconnect", {})
    await client.close()
    return results


def run(requests: int = 300) -> dict[str, dict[str, Any]]:
    with tempfile.TemporaryDirectory(prefix="raydebug-bench-snapshot-") as directory:
        script = write_script(Path(directory), "descend.py", SCRIPT)
        hub = start_hub()
        try:
            code, _, err = finish(hub.spawn(script, "fail", RAYDEBUG_SNAPSHOTS="1"))
            assert code == 1 and "bad stage" in err, err
            snapshot = hub.wait_listing("/api/snapshots", "the snapshot",
                                        lambda answer: answer["snapshots"])[0]["id"]
            hub.spawn(script, "pause")
            (session,) = hub.wait_sessions(1)
            return {"snapshot": asyncio.run(measure(hub, snapshot, requests)),
                    "session": asyncio.run(measure(hub, session["id"], requests))}
        finally:
            hub.close()


def table(results: dict[str, dict[str, Any]]) -> str:
    rows = [("measure (median)", "snapshot (hub)", "paused session (pydevd)", "ratio")]
    for measure in ("connect_to_stopped", "stackTrace", "scopes", "variables", "evaluate"):
        snapshot, session = (_median(results[kind][measure])
                             for kind in ("snapshot", "session"))
        rows.append((measure.replace("_", " "), f"{snapshot * 1000:.3f} ms",
                     f"{session * 1000:.3f} ms", f"{snapshot / session:.2f}"))
    widths = [max(len(row[i]) for row in rows) for i in range(4)]
    return "\n".join("  ".join(cell.ljust(width) for cell, width in zip(row, widths,
                                                                          strict=True)).rstrip()
                     for row in rows)


def _median(value: Any) -> float:
    return float(value["median"] if isinstance(value, dict) else value)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=300)
    args = parser.parse_args()
    print(table(run(args.requests)))


if __name__ == "__main__":
    main()
