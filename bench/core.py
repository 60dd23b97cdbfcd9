"""Core benchmark: a paused process debugged through the hub vs. stock debugpy, same run.

Columns: raydebug through the hub; stock debugpy with its in-process adapter, connected
directly; stock debugpy with its default adapter process, which is the path Ray's built-in
debugger takes (`RAY_DEBUG=1` calls debugpy.listen() in the worker).
"""

from __future__ import annotations

import asyncio
import json
import os
import select
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # devtools, shared with tests/
from devtools.processes import HubProcess, read_line, start_hub, stop
from raydebug.client.dap import DapClient

TARGET = Path(__file__).with_name("target.py")
MODES = tuple(os.environ.get("BENCH_MODES", "raydebug,nodelay,direct,adapter").split(","))
REQUESTS = ("threads", "stackTrace", "scopes", "variables", "evaluate")
BUDGET = 2.0  # seconds per measured request type (see timed())
MIN_SAMPLES = 20


FIRST_PAUSES = 4  # fresh processes per case of a first pause (one more at once: run_mode's)
READY_AFTER = 0.3  # s after the listing: a client that comes as a person or an editor does
NOISY = 0.2  # a measure whose interquartile range exceeds this share of its median


@dataclass
class Sample:
    values: list[float] = field(default_factory=list)

    def summary(self) -> dict[str, Any]:
        """Median, p95, n, and ``spread``: the interquartile range as a share of the median
        (``noisy`` above :data:`NOISY`; a single value has no spread)."""
        ordered = sorted(self.values)
        median = statistics.median(ordered)
        spread = 0.0
        if len(ordered) > 1 and median:
            low, _, high = statistics.quantiles(ordered, n=4, method="inclusive")
            spread = (high - low) / abs(median)
        return {
            "median": median,
            "p95": ordered[min(len(ordered) - 1, int(len(ordered) * 0.95))],
            "n": len(ordered),
            "spread": spread,
            "noisy": spread > NOISY,
        }


class HubLog:
    """The hub's stderr, drained on a thread (a full pipe would block the hub: it logs a
    line per connection) and kept in full, to print when a measure fails."""

    def __init__(self, hub: HubProcess) -> None:
        self.lines: list[str] = []
        assert hub.proc.stderr is not None
        self._thread = threading.Thread(target=self._drain, args=(hub.proc.stderr,),
                                        daemon=True)
        self._thread.start()

    def _drain(self, stream: Any) -> None:
        for line in stream:
            self.lines.append(line.rstrip("\n"))

    def tail(self, count: int = 80) -> str:
        return "\n".join(self.lines[-count:])


def start_logged_hub(*args: str) -> tuple[HubProcess, HubLog]:
    hub = start_hub(*args)
    return hub, HubLog(hub)


def report_failure(what: str, worker_stderr: Path | None, hub_log: HubLog | None) -> None:
    """Print what a failed measure leaves behind: the worker's stderr and the hub's log."""
    print(f"--- {what} failed ---", file=sys.stderr)
    if worker_stderr is not None and worker_stderr.exists():
        print(f"--- worker stderr ({worker_stderr}) ---\n{worker_stderr.read_text()}",
              file=sys.stderr)
    if hub_log is not None:
        print(f"--- hub log (last lines) ---\n{hub_log.tail()}", file=sys.stderr, flush=True)


def status_kib(pid: int, key: str) -> int:
    """A memory figure of /proc/PID/status (VmRSS, VmHWM: the peak RSS), in KiB; 0 if gone."""
    try:
        with open(f"/proc/{pid}/status") as status:
            return int(next(line for line in status if line.startswith(key)).split()[1])
    except (OSError, StopIteration):
        return 0


def rss_kib(pid: int) -> int:
    return status_kib(pid, "VmRSS")


def adapter_pids() -> set[int]:
    pids = set()
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                cmdline = Path(f"/proc/{entry}/cmdline").read_bytes()
            except OSError:
                continue
            if b"debugpy/adapter" in cmdline or b"debugpy\\adapter" in cmdline:
                pids.add(int(entry))
    return pids


def wait_listed(client_address: str, previous: str | None, timeout: float = 30) -> dict:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        url = f"http://{client_address}/api/sessions?min=1&timeout=10"
        with urllib.request.urlopen(url, timeout=20) as response:
            sessions = json.loads(response.read())
        fresh = [s for s in sessions if s["id"] != previous]
        if fresh:
            return fresh[0]
    raise TimeoutError("no session listed")


async def timed(count: int, action: Callable[[], Awaitable[Any]]) -> dict[str, Any]:
    """Time ``action`` ``count`` times, or fewer (at least MIN_SAMPLES) once BUDGET seconds
    are spent: the stock paths take 44-200 ms per request and vary little."""
    sample = Sample()
    deadline = time.perf_counter() + BUDGET
    while len(sample.values) < count and (len(sample.values) < MIN_SAMPLES
                                          or time.perf_counter() < deadline):
        start = time.perf_counter()
        await action()
        sample.values.append(time.perf_counter() - start)
    return sample.summary()


async def measure_session(client: DapClient, session_id: str | None, requests: int,
                          steps: int, footprint: Any) -> dict[str, Any]:
    """Attach, then time each request type and ``next`` (none with ``requests=0``); resume."""
    started = time.perf_counter()
    await client.initialize()
    # justMyCode off, as VS Code's Ray extension attaches: Ray's debugger stops in its own
    # frame first, which debugpy would otherwise step through silently.
    stopped = await client.attach(session_id, justMyCode=False)
    results: dict[str, Any] = {"connect_to_stopped": time.perf_counter() - started}
    footprint()
    thread_id = stopped.body["threadId"]
    frame = (await client.request("stackTrace", {"threadId": thread_id}))["stackFrames"][0]
    scopes = (await client.request("scopes", {"frameId": frame["id"]}))["scopes"]
    arguments = {
        "threads": {},
        "stackTrace": {"threadId": thread_id},
        "scopes": {"frameId": frame["id"]},
        "variables": {"variablesReference": scopes[0]["variablesReference"]},
        "evaluate": {"expression": "total + 1", "frameId": frame["id"], "context": "repl"},
    }
    if requests:
        for command in REQUESTS:
            results[command] = await timed(
                requests, lambda c=command: client.request(c, arguments[c]))

        async def step() -> None:
            await client.request("next", {"threadId": thread_id})
            await client.wait_event("stopped")

        results["next_to_stopped"] = await timed(steps, step)
    await client.request("continue", {"threadId": thread_id})
    await client.request("disconnect", {})
    await client.close()
    return results


def run_timed(argv: list[str], timeout: float, **popen: Any) -> float:
    """Run ``argv`` to its end (``check``ed); return the seconds from its start to its exit,
    as ``time`` says them. The wait is on the process's pidfd: ``subprocess.run(...,
    timeout=...)`` polls its child with sleeps growing to 50 ms, which measured a 60 ms
    ``raydebug list --json`` as 64, 114 or 165 ms. Raises ``TimeoutExpired`` after ``timeout``
    (the process is killed) and ``CalledProcessError`` on a non-zero exit."""
    start = time.perf_counter()
    proc = subprocess.Popen(argv, **popen)
    try:
        exited = os.pidfd_open(proc.pid)  # an unreaped child: valid even if it has exited
        try:
            ended = select.select([exited], [], [], timeout)[0]
        finally:
            os.close(exited)
        seconds = time.perf_counter() - start
        if not ended:
            raise subprocess.TimeoutExpired(argv, timeout)
        if proc.wait() != 0:
            raise subprocess.CalledProcessError(proc.returncode, argv)
        return seconds
    finally:
        stop(proc)


def worker_stderr_file(name: str) -> Path:
    """Where a benchmark's worker writes its stderr (kept, printed if the measure fails)."""
    handle, path = tempfile.mkstemp(prefix=f"raydebug-bench-{name}-", suffix=".err")
    os.close(handle)
    return Path(path)


def run_mode(mode: str, hub: Any, requests: int, steps: int, rounds: int,
             hub_log: HubLog | None = None, connect_after: float = 0.0) -> dict[str, Any]:
    """One process of ``mode`` paused ``rounds`` times, a client connecting to each pause
    ``connect_after`` seconds after it is listed (0: at once, the worst case of a first
    pause, whose debugger is still being imported)."""
    env = dict(os.environ, PYDEVD_DISABLE_FILE_VALIDATION="1")
    if mode == "raydebug":
        env.update(hub.env())
    else:
        env["PYTHONBREAKPOINT"] = "debugpy.breakpoint"
    adapters_before = adapter_pids()
    err_path = worker_stderr_file(mode)
    with err_path.open("w") as err:
        proc = subprocess.Popen([sys.executable, str(TARGET), mode, str(rounds)], env=env,
                                stdout=subprocess.PIPE, stderr=err, text=True)
    listed, results, extra_rss, extra_processes = Sample(), [], [], []
    previous = None
    failed = True
    try:
        for round_number in range(rounds):
            words = read_line(proc).split()
            assert words[0] == "T", words
            called, rss_before = float(words[1]), int(words[2])
            if mode == "raydebug":
                session = wait_listed(hub.client_address, previous)
                listed.values.append(time.time() - called)
                previous = session["id"]
                address = hub.client
            else:
                port_words = read_line(proc).split()
                listed.values.append(float(port_words[2]) - called)
                session = {"id": None}
                address = ("127.0.0.1", int(port_words[1]))

            if connect_after:
                time.sleep(connect_after)  # a person, or an editor, coming to it

            def footprint(before: int = rss_before) -> None:
                """Called while stopped: what pausing this process cost."""
                adapters = adapter_pids() - adapters_before
                extra_processes.append(len(adapters))
                extra_rss.append(rss_kib(proc.pid) - before
                                 + sum(rss_kib(pid) for pid in adapters))

            async def one(address: tuple[str, int] = address,
                          session_id: str | None = session["id"],
                          requests: int = requests if round_number == 0 else 0,
                          ) -> dict[str, Any]:  # request latencies: first round only
                client = await DapClient.connect(*address)
                return await measure_session(client, session_id, requests, steps, footprint)

            results.append(asyncio.run(asyncio.wait_for(one(), 600)))
        assert read_line(proc, timeout=120).startswith("END")
        failed = False
    finally:
        stop(proc)
        if failed:
            report_failure(f"core bench, mode {mode}", err_path, hub_log)
        err_path.unlink(missing_ok=True)
    return {
        "listed_first": listed.values[0],
        "listed_later": Sample(listed.values[1:]).summary() if rounds > 1 else None,
        "connect_to_stopped_first": results[0]["connect_to_stopped"],
        "connect_to_stopped_later": Sample([r["connect_to_stopped"] for r in results[1:]])
        .summary() if rounds > 1 else None,
        **({command: results[0][command] for command in (*REQUESTS, "next_to_stopped")}
           if requests else {}),
        "extra_processes": max(extra_processes),
        "extra_rss_mb": extra_rss[0] * 1024 / 1e6,
    }


def run(requests: int = 200, steps: int = 200, rounds: int = 5) -> dict[str, dict[str, Any]]:
    hub, hub_log = start_logged_hub()
    results = {}
    try:
        for mode in MODES:
            print(f"measuring {mode}...", file=sys.stderr, flush=True)
            # Stock debugpy is measured on a process's first pause only: after a client
            # disconnects, is_client_connected() stays true in its in-process mode.
            results[mode] = run_mode(mode, hub, requests, steps,
                                     rounds if mode == "raydebug" else 1, hub_log)
            # A first pause happens once a process: more processes for its two cases, a
            # client connecting at once and one coming READY_AFTER later, as people do.
            for case, after in (("connect_to_stopped_first", 0.0),
                                ("connect_to_stopped_first_ready", READY_AFTER)):
                firsts = [run_mode(mode, hub, 0, 0, 1, hub_log, after)[
                    "connect_to_stopped_first"] for _ in range(FIRST_PAUSES)]
                if after == 0.0:
                    firsts.append(results[mode][case])
                results[mode][case] = Sample(firsts).summary()
        return results
    finally:
        hub.close()
