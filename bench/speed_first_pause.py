"""``breakpoint()`` -> the client's ``stopped``, end to end, with the client already waiting.

What a user feels with an IDE attached to the cluster: the time from the ``breakpoint()`` call
to the ``stopped`` event at the client. Per process (``--processes`` of them, each a fresh
interpreter so that its first pause imports and starts pydevd):

- ``first``: a client waits on the hub for the next pause (attach with no session), then
  the process calls ``breakpoint()`` for the first time;
- ``later, same client``: that client continued and stayed attached; the next
  ``breakpoint()`` of the process stops in it;
- ``later, new client``: a new client waits for the next pause, after the first one left.

The process waits for a line on stdin before each ``breakpoint()``, and prints the wall time
just before it (the client's clock is the same machine's).
"""

from __future__ import annotations

import argparse
import asyncio
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import core
from raydebug.client.dap import DapClient

TARGET = """
import sys, time
for i in range(3):
    sys.stdin.readline()
    print("T", time.time(), flush=True)
    breakpoint()
    i += 0
"""


async def waiting_client(hub: Any) -> tuple[DapClient, asyncio.Future[Any]]:
    client = await DapClient.connect(*hub.client)
    await client.initialize()
    attaching = asyncio.ensure_future(client.attach(timeout=60))
    await asyncio.sleep(0.2)  # the hub has it waiting for the next pause
    return client, attaching


async def one_process(hub: Any, hub_log: core.HubLog, script: Path) -> dict[str, float]:
    err_path = core.worker_stderr_file("first-pause")
    with err_path.open("w") as err:
        proc = subprocess.Popen([sys.executable, str(script)], env=hub.env(),
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=err,
                                text=True)
    assert proc.stdin is not None and proc.stdout is not None

    def go() -> float:
        proc.stdin.write("go\n")  # type: ignore[union-attr]
        proc.stdin.flush()  # type: ignore[union-attr]
        return float(core.read_line(proc, timeout=60).split()[1])

    failed = True
    try:
        times = {}
        client, attaching = await waiting_client(hub)
        called = await asyncio.to_thread(go)
        stopped = await attaching
        times["first"] = time.time() - called
        await client.request("continue", {"threadId": stopped.body["threadId"]})
        called = await asyncio.to_thread(go)
        stopped = await client.wait_event("stopped", timeout=60)
        times["later, same client"] = time.time() - called
        await client.request("continue", {"threadId": stopped.body["threadId"]})
        await client.request("disconnect", {})
        await client.close()
        client, attaching = await waiting_client(hub)
        called = await asyncio.to_thread(go)
        stopped = await attaching
        times["later, new client"] = time.time() - called
        await client.request("disconnect", {})
        await client.close()
        await asyncio.to_thread(proc.wait, 60)
        failed = False
        return times
    finally:
        core.stop(proc)
        if failed:
            core.report_failure("breakpoint() -> stopped", err_path, hub_log)
        err_path.unlink(missing_ok=True)


def run(processes: int = 10) -> dict[str, Any]:
    hub, hub_log = core.start_logged_hub()
    script = Path(core.worker_stderr_file("first-pause-target")).with_suffix(".py")
    script.write_text(TARGET)
    try:
        runs = [asyncio.run(asyncio.wait_for(one_process(hub, hub_log, script), 180))
                for _ in range(processes)]
    finally:
        hub.close()
    return {key: core.Sample([r[key] for r in runs]).summary() for key in runs[0]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--processes", type=int, default=10)
    args = parser.parse_args()
    for key, summary in run(args.processes).items():
        print(f"breakpoint() -> stopped, {key}: median {summary['median'] * 1000:.0f} ms, "
              f"p95 {summary['p95'] * 1000:.0f} ms (n={summary['n']})")


if __name__ == "__main__":
    main()
