"""Issue 28's scale measure: many paused processes in one group session, beside the same
processes seen as child sessions (one DAP session each, startDebugging), in one run.

As in :mod:`scale`, a load generator (this file run with ``--generate``: one process,
asyncio) opens N real connections to a real hub subprocess and speaks the real link
protocol (mutual handshake, Identify, SessionStarted); here each simulated process also
answers the hub's ``OpenDataConnection`` with a real, authenticated data connection on
which it answers DAP as pydevd does for one thread stopped at a breakpoint (``initialize``,
``attach``, ``configurationDone`` then its ``stopped`` at ``ClientReady``, ``threads``, a
30-frame ``stackTrace``, ``continue``, ``disconnect``). So the numbers are the hub's own
(routing, id mapping, merging, fan-out), not pydevd's; ``bench/core.py`` measures pydevd's
requests through the hub.

Measures, each for the group session and for child sessions:

- *join*: from the client's ``configurationDone`` to every process's ``stopped`` (child
  sessions: to every offered child attached and stopped);
- *threads*: one ``threads`` answer naming every process (child sessions: a ``threads`` in
  each, all sent at once, until the last answer);
- *stackTrace*: one process's, through the hub;
- *continue all*: the one ``continue`` answered (child sessions: one per session, all sent
  at once, until the last answer);
- hub memory per process, joined, beyond the paused process's listing.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import core
import live_scale
import scale
from devtools.processes import read_line, stop
from devtools.processes import run as run_async
from raydebug.client.dap import DapClient
from raydebug.hub.clients.group_session import RUNNING_THREADS_FRESH
from raydebug.hub.net import read_next
from raydebug.protocol import NEED_DATA, DapConnection, Event, Request, Response
from raydebug.protocol.control import (
    ROLE_CONTROL,
    ROLE_DATA,
    Challenge,
    ClientGone,
    ClientReady,
    CollectStacks,
    ControlConnection,
    Identify,
    OpenDataConnection,
    Register,
    SessionEnded,
    SessionStarted,
    Stacks,
    Welcome,
    encode_control,
)
from raydebug.protocol.handshake import AgentHandshake

FRAMES = 30
STACK_SAMPLES = 200

# -- the load generator: simulated paused processes with a DAP-speaking debugger -------------


def _frames() -> list[dict[str, Any]]:
    return [{"id": index, "name": f"layer_{index}", "line": 100 + index, "column": 1,
             "source": {"path": "/tmp/ray/job/train/step.py"}} for index in range(1, FRAMES + 1)]


RUNNING_THREADS = [{"id": 140_000_000 + n, "name": name, "daemon": n > 0,
                    "frames": [{"file": "/tmp/ray/job/train/step.py", "line": 40 + n,
                                "function": "loop", "code": "step()"}]}
                   for n, name in enumerate(("MainThread", "loader", "heartbeat"))]


class FakeProcess:
    """One simulated paused process: its control connection and, while a client debugs it,
    one data connection whose DAP it answers as pydevd does. ``running``: a running live
    process instead, which answers the hub's ``CollectStacks`` with three threads."""

    def __init__(self, host: str, port: int, token: str, index: int,
                 running: bool = False) -> None:
        self.address, self.token, self.index = (host, port), token, index
        self.running = running
        self.session = scale.fake_session(index)
        self.control: asyncio.StreamWriter | None = None
        self.data: dict[int, tuple[asyncio.StreamWriter, DapConnection]] = {}
        self.seq = 0
        self.tasks: set[asyncio.Task[None]] = set()

    def _start(self, coroutine: Any) -> None:
        task = asyncio.ensure_future(coroutine)
        self.tasks.add(task)
        task.add_done_callback(self._done)

    def _done(self, task: asyncio.Task[None]) -> None:
        self.tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            print(f"simulated process {self.index}: {task.exception()!r}", file=sys.stderr)

    async def _connect(self, role: str, channel: int = 0) -> tuple[
            asyncio.StreamReader, asyncio.StreamWriter, bytes]:
        reader, writer = await asyncio.open_connection(*self.address)
        handshake = AgentHandshake(self.token, role, channel=channel, hub="the hub")
        if not isinstance(await read_next(reader, handshake.receive_data,
                                          handshake.next_event), Challenge):
            raise RuntimeError("no challenge")
        writer.write(handshake.send())
        if not isinstance(await read_next(reader, handshake.receive_data,
                                          handshake.next_event), Welcome):
            raise RuntimeError("refused")
        return reader, writer, handshake.take_buffered()

    async def register(self, gate: asyncio.Semaphore) -> bool:
        async with gate:
            try:
                reader, writer, rest = await self._connect(ROLE_CONTROL)
            except (OSError, RuntimeError):
                return False
        self.control = writer
        if self.running:
            record = live_scale.fake_record(self.index)
            writer.write(encode_control(Identify(process={
                key: record[key] for key in ("pid", "host", "argv", "python")})))
            writer.write(encode_control(Register(process=record)))
        else:
            writer.write(encode_control(Identify(process=scale.fake_process(self.index))))
            writer.write(encode_control(SessionStarted(session=self.session)))
        self._start(self._serve_control(reader, rest))
        return True

    async def _serve_control(self, reader: asyncio.StreamReader, rest: bytes) -> None:
        connection = ControlConnection()
        if rest:  # (b"" would say the hub closed)
            connection.receive_data(rest)
        while (message := await read_next(reader, connection.receive_data,
                                          connection.next_event)) is not None:
            if isinstance(message, CollectStacks) and self.control is not None:
                self.control.write(encode_control(Stacks(
                    request_id=message.request_id,
                    threads=RUNNING_THREADS if message.frames else [])))
            elif isinstance(message, OpenDataConnection):
                self._start(self._serve_data(message.channel))
            elif isinstance(message, ClientReady) and message.channel in self.data:
                self._send(message.channel, Event(0, "stopped", {
                    "reason": "breakpoint", "threadId": 1, "allThreadsStopped": True}))
            elif isinstance(message, ClientGone) and message.channel in self.data:
                self.data.pop(message.channel)[0].close()

    def _send(self, channel: int, message: Event | Response) -> None:
        writer, dap = self.data[channel]
        self.seq += 1
        message = (Event(self.seq, message.event, message.body) if isinstance(message, Event)
                   else Response(self.seq, message.request_seq, message.command,
                                 message.success, message.message, message.body))
        writer.write(dap.send(message))

    async def _serve_data(self, channel: int) -> None:
        reader, writer, rest = await self._connect(ROLE_DATA, channel)
        dap = DapConnection()
        self.data[channel] = (writer, dap)
        if rest:
            dap.receive_data(rest)
        while True:
            message = dap.next_event()
            if message is NEED_DATA:
                data = await reader.read(65536)
                if not data:
                    break
                dap.receive_data(data)
                continue
            if isinstance(message, Request) and channel in self.data:
                self._answer(channel, message)
        self.data.pop(channel, None)
        writer.close()

    def _answer(self, channel: int, request: Request) -> None:
        body: dict[str, Any] = {}
        if request.command == "threads":
            body = {"threads": [{"id": 1, "name": "MainThread"}]}
        elif request.command == "stackTrace":
            body = {"stackFrames": _frames(), "totalFrames": FRAMES}
        elif request.command == "setBreakpoints":
            body = {"breakpoints": []}
        elif request.command == "continue":
            body = {"allThreadsContinued": True}
        self._send(channel, Response(0, request.seq, request.command, body=body))
        if request.command == "attach":
            self._send(channel, Event(0, "initialized", {}))
        if request.command in ("continue", "disconnect") and self.control is not None:
            self.control.write(encode_control(SessionEnded(session_id=self.session["id"])))
            self.session = {**self.session, "id": os.urandom(6).hex()}

    def pause_again(self) -> None:
        """A new breakpoint() stop: the next client finds it paused."""
        assert self.control is not None
        if not self.running:
            self.control.write(encode_control(SessionStarted(session=self.session)))


async def generate(agent: str, token: str, count: int, running: int) -> None:
    """Serve commands from stdin: ``register`` (answers ``SENT refused``), ``pause`` (every
    process that resumed pauses again: ``PAUSED``); end of input closes everything."""
    host, port = agent.rsplit(":", 1)
    loop = asyncio.get_running_loop()
    processes = [FakeProcess(host, int(port), token, index) for index in range(count)]
    processes += [FakeProcess(host, int(port), token, index, running=True)
                  for index in range(running)]
    while command := (await loop.run_in_executor(None, sys.stdin.readline)).strip():
        if command == "register":
            gate = asyncio.Semaphore(scale.CONNECT_CONCURRENCY)
            done = await asyncio.gather(*(p.register(gate) for p in processes))
            print(f"SENT {done.count(False)}", flush=True)
        elif command == "pause":
            for process in processes:
                process.pause_again()
            print("PAUSED", flush=True)


# -- the measures ------------------------------------------------------------------------------


class Bench:
    """A hub subprocess and the generator."""

    def __init__(self, count: int, running: int) -> None:
        self.count, self.running = count, running
        limit = str(2 * count + running + 64)
        self.hub, self.hub_log = core.start_logged_hub(
            "--max-sessions", limit, "--max-agent-connections", limit,
            "--max-client-connections", limit, "--log-level", "warning")
        self.generator = subprocess.Popen(
            [sys.executable, __file__, "--generate", self.hub.agent_address, self.hub.token,
             str(count), str(running)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            text=True)

    def command(self, command: str) -> str:
        assert self.generator.stdin is not None
        self.generator.stdin.write(command + "\n")
        self.generator.stdin.flush()
        return read_line(self.generator, timeout=300)

    def wait_waiting(self, timeout: float = 120) -> None:
        deadline = time.monotonic() + timeout
        n = self.count
        while len(self.hub.get(f"/api/sessions?min={n}&state=waiting&timeout=10",
                               timeout=60)) < n:
            if time.monotonic() > deadline:
                raise TimeoutError(f"not {n} waiting sessions: {self.hub_log.tail()}")

    def close(self) -> None:
        stop(self.generator)
        self.hub.close()


async def _timed(awaitable: Any) -> tuple[float, Any]:
    start = time.perf_counter()
    result = await awaitable
    return time.perf_counter() - start, result


async def group_session(bench: Bench, repeats: int) -> dict[str, Any]:
    hub = bench.hub
    rss_before = core.rss_kib(hub.proc.pid)
    client = await DapClient.connect(*hub.client)
    await client.initialize(supportsStartDebuggingRequest=False)
    attach = client.send_request("attach", {"name": "job", "raydebug": {"group": True}})
    await client.wait_event("initialized")
    await attach
    start = time.perf_counter()
    await client.request("configurationDone")
    stopped = [await client.wait_event("stopped", timeout=60) for _ in range(bench.count)]
    join = time.perf_counter() - start
    listed = bench.count + len(RUNNING_THREADS) * bench.running
    threads, asking = core.Sample(), core.Sample()
    for _ in range(repeats):  # the running ones' reports are fresh: as they are
        elapsed, answer = await _timed(client.request("threads", timeout=60))
        assert len(answer["threads"]) == listed
        threads.values.append(elapsed)
    for _ in range(3 if bench.running else 0):  # each running one's agent asked again
        await asyncio.sleep(RUNNING_THREADS_FRESH)
        elapsed, answer = await _timed(client.request("threads", timeout=60))
        assert len(answer["threads"]) == listed
        asking.values.append(elapsed)
    rss_joined = core.rss_kib(hub.proc.pid)
    stack = core.Sample()
    for _ in range(STACK_SAMPLES):
        thread = random.choice(stopped).body["threadId"]
        elapsed, answer = await _timed(client.request("stackTrace", {"threadId": thread}))
        assert len(answer["stackFrames"]) == FRAMES
        stack.values.append(elapsed)
    elapsed, answer = await _timed(client.request("continue", {
        "threadId": stopped[0].body["threadId"]}, timeout=120))
    assert answer["allThreadsContinued"] is True
    await client.request("disconnect", {}, timeout=120)
    await client.close()
    return {"join": join, "threads": threads.summary(), "stackTrace": stack.summary(),
            "continue_all": elapsed, "running": bench.running,
            "threads_asking_running": asking.summary() if asking.values else None,
            "hub_kb_per_process": (rss_joined - rss_before) * 1024 / 1000 / bench.count}


async def child_sessions(bench: Bench, repeats: int) -> dict[str, Any]:
    """The same processes as VS Code sees them with child sessions: one connection each."""
    hub = bench.hub
    rss_before = core.rss_kib(hub.proc.pid)
    parent = await DapClient.connect(*hub.client)
    await parent.initialize(supportsStartDebuggingRequest=True)
    attach = parent.send_request("attach", {"name": "cluster", "connect": {
        "host": hub.client[0], "port": hub.client[1]}})
    await parent.wait_event("initialized")
    start = time.perf_counter()
    await parent.request("configurationDone")
    await attach

    async def child() -> tuple[DapClient, int]:
        offer = await parent.wait_reverse_request("startDebugging", timeout=300)
        configuration = dict(offer.arguments["configuration"])
        configuration.pop("request", None)
        connection = await DapClient.connect(*hub.client)
        await connection.initialize()
        stop = await connection.attach(timeout=120, **configuration)
        parent.respond(offer)
        return connection, int(stop.body["threadId"])

    children = await asyncio.gather(*(child() for _ in range(bench.count)))
    join = time.perf_counter() - start
    threads = core.Sample()
    for _ in range(repeats):
        elapsed, _ = await _timed(asyncio.gather(*(c.request("threads", timeout=60)
                                                   for c, _ in children)))
        threads.values.append(elapsed)
    rss_joined = core.rss_kib(hub.proc.pid)
    stack = core.Sample()
    for _ in range(STACK_SAMPLES):
        connection, thread = random.choice(children)
        elapsed, _ = await _timed(connection.request("stackTrace", {"threadId": thread}))
        stack.values.append(elapsed)
    elapsed, _ = await _timed(asyncio.gather(*(c.request("continue", {"threadId": t},
                                                         timeout=120) for c, t in children)))
    for connection, _ in children:
        await connection.request("disconnect", {})
        await connection.close()
    await parent.request("disconnect", {})
    await parent.close()
    return {"join": join, "threads": threads.summary(), "stackTrace": stack.summary(),
            "continue_all": elapsed,
            "hub_kb_per_process": (rss_joined - rss_before) * 1024 / 1000 / bench.count}


def run(count: int = 1000, repeats: int = 10, running: int = 200) -> dict[str, Any]:
    scale.raise_fd_limit(6 * count + 256)
    os.environ.setdefault("XDG_STATE_HOME", tempfile.mkdtemp(prefix="raydebug-bench-state-"))
    bench = Bench(count, running)
    try:
        refused = bench.command("register").split()[1]
        if int(refused):
            raise RuntimeError(f"the hub refused {refused} simulated processes")
        bench.wait_waiting()
        group = run_async(group_session(bench, repeats), timeout=600)
        bench.command("pause")
        bench.wait_waiting()
        child = run_async(child_sessions(bench, repeats), timeout=600)
        return {"processes": count, "group": group, "child_sessions": child}
    finally:
        bench.close()


def table(results: dict[str, Any]) -> str:
    """The group session's numbers beside the child sessions' (the same processes, the same
    hub, one run), in the style of bench/run.py's tables."""
    def ms(value: Any) -> str:
        seconds = value["median"] if isinstance(value, dict) else value
        return f"{seconds * 1000:.2f} ms"

    n = results["processes"]
    group, child = results["group"], results["child_sessions"]
    rows = [("measure (one hub, simulated debuggers)", "group session", "child sessions",
             "target"),
            (f"{n:,} paused: configurationDone -> every stopped", ms(group["join"]),
             ms(child["join"]), "-"),
            (f"threads naming {n:,} processes (median)", ms(group["threads"]),
             ms(child["threads"]), "<= 1 s"),
            *([(f"  + {group['running']:,} running, each agent asked (median)",
                ms(group["threads_asking_running"]), "n/a", "-")]
              if group.get("threads_asking_running") else []),
            ("stackTrace, 30 frames, through the hub (median)", ms(group["stackTrace"]),
             ms(child["stackTrace"]), "<= 5 ms"),
            (f"continue all {n:,}", ms(group["continue_all"]), ms(child["continue_all"]),
             "<= 2 s"),
            ("hub memory per joined process", f"{group['hub_kb_per_process']:.0f} KB",
             f"{child['hub_kb_per_process']:.0f} KB", "<= 50 KB beyond child sessions'")]
    widths = [max(len(row[column]) for row in rows) for column in range(len(rows[0]))]
    return "\n".join("  ".join(cell.ljust(width) for cell, width in zip(row, widths,
                                                                        strict=True)).rstrip()
                     for row in rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--generate", nargs=4, metavar=("AGENT", "TOKEN", "COUNT", "RUNNING"),
                        help="Be the load generator (driven through stdin).")
    parser.add_argument("--processes", type=int, default=1000)
    parser.add_argument("--running", type=int, default=200,
                        help="Running live processes in the group besides the paused.")
    args = parser.parse_args()
    if args.generate:
        agent, token, count, running = args.generate
        scale.raise_fd_limit(3 * int(count) + int(running) + 256)
        asyncio.run(generate(agent, token, int(count), int(running)))
    else:
        results = run(args.processes, running=args.running)
        print(json.dumps(results, indent=1))
        print(table(results))


if __name__ == "__main__":
    main()
