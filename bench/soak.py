"""Soak: N first pauses, each attached the instant it is registered; prints failures/N.

Not part of `make test` (it runs minutes). Each round starts a fresh process (so every pause
is a first pause: pydevd is imported then), with a client already waiting on the hub for the
next breakpoint: the IDE-attached-to-the-cluster case, where the attach races the import.
Some rounds make ``Debugger._start`` slower (``--slow``: a share of rounds, ``--slow-seconds``
each), and with ``--drop-caches`` (root only) the page cache is dropped before a round, as
on a cold node. A failed round prints the client's error, the worker's stderr and the tail of
the hub's log.

    .venv/bin/python bench/soak.py -n 200 --slow 0.3 --drop-caches
"""

from __future__ import annotations

import argparse
import asyncio
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from core import start_logged_hub
from devtools.processes import HubProcess, stop

WORKER = """
import sys, time
if float(sys.argv[1]) > 0:
    from raydebug.agent.debugger.facade import Debugger
    _start = Debugger._start
    def slow_start(self, delay=float(sys.argv[1])):
        time.sleep(delay)
        _start(self)
    Debugger._start = slow_start
value = 41
breakpoint()
print("finished", value + 1, flush=True)
"""


async def attach_next(hub: HubProcess, spawn: subprocess.Popen[str] | None = None) -> str:
    """Wait on the hub for the next pause, attach, evaluate ``value``, disconnect."""
    from raydebug.client.dap import DapClient

    client = await DapClient.connect(*hub.client)
    try:
        await client.initialize()
        stopped = await client.attach(timeout=60)
        frames = await client.request("stackTrace", {"threadId": stopped.body["threadId"]})
        value = await client.request("evaluate", {
            "expression": "value", "frameId": frames["stackFrames"][0]["id"],
            "context": "repl"})
        await client.request("disconnect", {})
        return str(value["result"])
    finally:
        await client.close()


def drop_caches() -> None:
    subprocess.run(["sync"], check=False)
    Path("/proc/sys/vm/drop_caches").write_text("3\n")


def one_round(hub: HubProcess, script: Path, delay: float, log_dir: Path,
              number: int) -> str | None:
    """One first pause; None if it worked, else what went wrong (with the worker's stderr)."""
    err_path = log_dir / f"worker-{number}.err"

    async def attempt() -> str:
        attaching = asyncio.ensure_future(attach_next(hub))
        await asyncio.sleep(0.01)  # the client is waiting on the hub before the pause exists
        with err_path.open("w") as err:
            proc = subprocess.Popen([sys.executable, str(script), str(delay)], env=hub.env(),
                                    stdout=subprocess.PIPE, stderr=err, text=True)
        try:
            value = await asyncio.wait_for(attaching, 90)
            out, _ = await asyncio.to_thread(proc.communicate, timeout=60)
            if value != "41" or "finished 42" not in out:
                return f"evaluate gave {value!r}; output {out!r}"
            return ""
        finally:
            stop(proc)

    try:
        problem = asyncio.run(attempt())
    except Exception as error:
        problem = f"{type(error).__name__}: {error}"
    if not problem:
        err_path.unlink()
        return None
    return f"{problem}\n--- worker stderr ---\n{err_path.read_text()}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("-n", type=int, default=100, help="Rounds (first pauses).")
    parser.add_argument("--slow", type=float, default=0.25,
                        help="Share of rounds whose debugger start is made slower.")
    parser.add_argument("--slow-seconds", type=float, default=1.0)
    parser.add_argument("--drop-caches", action="store_true",
                        help="Drop the page cache before each cold round (root only).")
    args = parser.parse_args()
    if args.drop_caches and os.geteuid() != 0:
        parser.error("--drop-caches needs root")
    log_dir = Path(tempfile.mkdtemp(prefix="raydebug-soak-"))
    script = log_dir / "worker.py"
    script.write_text(WORKER)
    hub, hub_log = start_logged_hub()
    failures: list[str] = []
    started = time.monotonic()
    slow_rounds = 0
    try:
        for number in range(args.n):
            slow = (number * args.slow) % 1 + args.slow >= 1  # spread evenly over the run
            slow_rounds += slow
            if args.drop_caches and number % 2:
                drop_caches()
            problem = one_round(hub, script, args.slow_seconds if slow else 0.0, log_dir,
                                number)
            if problem is not None:
                failures.append(problem)
                print(f"round {number} failed ({'slow' if slow else 'normal'} start): "
                      f"{problem}", file=sys.stderr, flush=True)
    finally:
        hub.close()
    if failures:
        print(f"--- hub log (tail) ---\n{hub_log.tail()}", file=sys.stderr)
    cold = ", page cache dropped every other round" if args.drop_caches else ""
    print(f"{len(failures)}/{args.n} first-pause attaches failed ({slow_rounds} with a start "
          f"{args.slow_seconds:g} s slower{cold}); {time.monotonic() - started:.0f} s")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
