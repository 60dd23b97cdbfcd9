"""The hub's share of a DAP request, with the machine's noise taken out: one paused core-bench
process per variant, and each request sent to them in turn (order reversed every other
time), so that whatever load the shared machine has falls on every variant alike.

Variants: ``raydebug`` (through a hub of this tree), ``nodelay`` (stock pydevd with
``TCP_NODELAY``: the floor), and with ``--old-src DIR`` (a ``src`` directory of another
commit, e.g. ``git archive REV src | tar -x -C DIR``) ``old``, through a hub run from it. Also
prints each hub's and process's CPU per request (``/proc/PID/task/*/schedstat``): steadier
than the round trips. ``core.run``'s runs measure each mode at another moment, and moved by
+-0.1 ms run to run on this machine (docs/design.md#per-step-costs).

    .venv/bin/python bench/interleaved.py [--requests 400] [--old-src /tmp/old/src]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import core
from devtools.processes import HubProcess, read_line, stop
from raydebug.client.dap import DapClient


def cpu_ns(pid: int) -> int:
    """The nanoseconds process ``pid`` has run on a CPU, all its threads."""
    total = 0
    for thread in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{thread}/schedstat") as stat:
                total += int(stat.read().split()[0])
        except OSError:
            pass  # a thread that ended meanwhile
    return total


def start_hub(src: str | None) -> HubProcess:
    """A hub of this tree, or run from ``src`` (on PYTHONPATH: it comes before the venv's)."""
    saved = os.environ.get("PYTHONPATH")
    if src:
        os.environ["PYTHONPATH"] = src
    try:
        return core.start_logged_hub()[0]
    finally:
        if src:
            if saved is None:
                del os.environ["PYTHONPATH"]
            else:
                os.environ["PYTHONPATH"] = saved


async def paused(hub: HubProcess | None, processes: list[subprocess.Popen[str]],
                 ) -> tuple[DapClient, dict[str, dict[str, Any]]]:
    """A core-bench process paused under ``hub`` (None: stock pydevd, ``nodelay``), its
    client attached; returns the client and each request's arguments."""
    env = dict(os.environ, PYDEVD_DISABLE_FILE_VALIDATION="1")
    if hub is not None:
        env.update(hub.env())
    else:
        env["PYTHONBREAKPOINT"] = "debugpy.breakpoint"
    mode = "raydebug" if hub is not None else "nodelay"
    proc = subprocess.Popen([sys.executable, str(core.TARGET), mode, "1"], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    processes.append(proc)
    read_line(proc)  # "T ...": about to pause
    if hub is not None:
        address, session = hub.client, core.wait_listed(hub.client_address, None)["id"]
    else:
        address, session = ("127.0.0.1", int(read_line(proc).split()[1])), None
    client = await DapClient.connect(*address)
    await client.initialize()
    thread = (await client.attach(session, justMyCode=False)).body["threadId"]
    frame = (await client.request("stackTrace", {"threadId": thread}))["stackFrames"][0]
    scopes = (await client.request("scopes", {"frameId": frame["id"]}))["scopes"]
    return client, {
        "threads": {},
        "stackTrace": {"threadId": thread},
        "scopes": {"frameId": frame["id"]},
        "variables": {"variablesReference": scopes[0]["variablesReference"]},
        "evaluate": {"expression": "total + 1", "frameId": frame["id"], "context": "repl"},
    }


async def measure(hubs: dict[str, HubProcess | None], requests: int,
                  processes: list[subprocess.Popen[str]]) -> None:
    names = list(hubs)
    clients = {name: await paused(hub, processes) for name, hub in hubs.items()}
    pids = {name: proc.pid for name, proc in zip(names, processes, strict=True)}
    watched = {**{f"{n} process": p for n, p in pids.items()},
               **{f"{n} hub": h.proc.pid for n, h in hubs.items() if h is not None}}
    before = {what: cpu_ns(pid) for what, pid in watched.items()}
    times: dict[str, dict[str, list[float]]] = {n: {c: [] for c in core.REQUESTS} for n in names}
    for command in core.REQUESTS:
        for turn in range(requests):
            for name in names if turn % 2 == 0 else names[::-1]:
                client, arguments = clients[name]
                start = time.perf_counter()
                await client.request(command, arguments[command])
                times[name][command].append(time.perf_counter() - start)
    count = requests * len(core.REQUESTS)
    print("CPU per request: " + ", ".join(
        f"{what} {(cpu_ns(pid) - before[what]) / count / 1000:.0f} us"
        for what, pid in watched.items()))
    print(f"load {os.getloadavg()[0]:.1f}; round trip median (ms), and over nodelay's:")
    for command in core.REQUESTS:
        median = {n: statistics.median(times[n][command]) * 1000 for n in names}
        print(f"  {command:11s} " + "  ".join(
            f"{n} {median[n]:.3f}" + (f" (+{median[n] - median['nodelay']:.3f})"
                                      if n != "nodelay" else "") for n in names))
    for client, _ in clients.values():
        await client.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=400, help="Of each type, per variant.")
    parser.add_argument("--old-src", help="A src directory of another commit: its hub too.")
    args = parser.parse_args()
    hubs: dict[str, HubProcess | None] = {}
    processes: list[subprocess.Popen[str]] = []
    try:
        if args.old_src:
            hubs["old"] = start_hub(args.old_src)
        hubs["raydebug"] = start_hub(None)
        hubs["nodelay"] = None
        asyncio.run(asyncio.wait_for(measure(hubs, args.requests, processes), 600))
    finally:
        for proc in processes:
            stop(proc)
        for hub in hubs.values():
            if hub is not None:
                hub.close()


if __name__ == "__main__":
    main()
