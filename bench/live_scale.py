"""Live processes at scale: ``raydebug stacks`` across 1,000 linked processes, with
``py-spy dump`` as the anchor; then 10,000 linked processes on one hub: ``ps --json``, the
hub's memory, the registration rate, and ``pause`` of one among them until its session is
listed.

A load generator (this file run with ``--generate``: one process, asyncio) opens real TCP
connections to a real hub subprocess's agent listener and speaks the real link protocol
on each, as a live agent does: the agent's side of the real mutual handshake, ``Identify``,
``Register`` with a Ray worker's record (its own pid, node, rank), then it answers the hub's
questions on that connection: ``CollectStacks`` with ``Stacks`` (threads read once, at the
generator's start, by the agent's own code from real blocked threads: a training loop in
``all_reduce``, and for a few "stragglers" a loop stuck in ``next_batch``), and ``Pause``
with the ``SessionStarted`` of a paused thread and ``Paused``, as the agent sends them.

Beside it, a few *real* processes run with ``RAYDEBUG_LIVE=1`` (the real link thread):
``raydebug stacks pid=P`` of one of them and ``py-spy dump --pid P`` of the same process
are timed side by side (py-spy needs ptrace: root, or ``kernel.yama.ptrace_scope=0``).
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import json
import os
import secrets
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import core
from devtools.processes import wait_processes
from raydebug.hub.net import read_next
from raydebug.protocol.control import (
    MAX_CONTROL_MESSAGE,
    ROLE_CONTROL,
    Challenge,
    CollectStacks,
    ControlConnection,
    Identify,
    Pause,
    Paused,
    Register,
    SessionStarted,
    Stacks,
    Welcome,
    encode_control,
)
from raydebug.protocol.framing import NeedData, frame
from raydebug.protocol.handshake import AgentHandshake
from scale import ARGV, CONNECT_CONCURRENCY, raise_fd_limit

EXTRA_HUB_ARGS = os.environ.get("BENCH_HUB_ARGS", "").split()
STRAGGLER_EVERY = 333  # one generated process in this many is stuck elsewhere
NOW = json.dumps({"task_name": "Trainer.train_step"})  # what a worker says it runs now
FAKE_PID = 2_000_000  # generated pids start here: above any real pid of this machine
REAL_SCRIPT = """
import time
def work():
    total = 0
    while True:
        total += 1
        time.sleep(0.005)
print("ready", flush=True)
work()
"""

# -- the load generator ------------------------------------------------------------------


def _sample_threads() -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Two real stacks read by the agent's own code (raydebug.agent.stacks): a thread of
    a training loop waiting in ``all_reduce``, and one stuck in ``next_batch``."""
    from raydebug.agent.stacks import collect_threads

    never = threading.Event()

    def wait(step: int) -> None:
        never.wait()

    def all_reduce(step: int) -> None:
        wait(step)

    def next_batch(step: int) -> None:
        wait(step)

    def train_loop(stuck: bool) -> None:
        for step in range(1):
            (next_batch if stuck else all_reduce)(step)

    threads = [threading.Thread(target=train_loop, args=(stuck,), name=f"train-{stuck}",
                                daemon=True) for stuck in (False, True)]
    for thread in threads:
        thread.start()
    deadline = time.monotonic() + 10
    while True:
        found = {t["name"]: t for t in collect_threads(with_locals=True)}
        if all(t.name in found and found[t.name]["frames"][-1]["function"] == "wait"
               for t in threads) or time.monotonic() > deadline:
            break
        time.sleep(0.01)
    common, stuck = (found[t.name] for t in threads)
    for thread_record in (common, stuck):
        thread_record["name"] = "MainThread"
    return [common], [stuck]


def fake_record(index: int) -> dict[str, Any]:
    """What ``Register`` says about a Ray worker (raydebug.agent.link.live.process_record)."""
    node = index // 16
    return {"pid": FAKE_PID + index, "host": f"worker-{node:03d}", "argv": ARGV,
            "labels": {"RANK": str(index), "WORLD_SIZE": "10000"}, "since": time.time(),
            "parent_pid": 1, "python": "3.11.7", "job_id": "02000000",
            "node_id": f"{node:056x}", "node_ip": f"10.0.{node // 256}.{node % 256}",
            "worker_id": secrets.token_hex(28), "actor_class": "Trainer"}


def pause_session(index: int) -> dict[str, Any]:
    """A paused thread as the agent reports a ``pause`` (PausedThread.to_dict())."""
    record = fake_record(index)
    return {"id": secrets.token_hex(6), "pid": record["pid"], "host": record["host"],
            "file": "/srv/train.py", "line": 40, "function": "all_reduce", "reason": "pause",
            "exception": None, "source": "work.wait()", "thread": "MainThread",
            "since": time.time(), "argv": ARGV, "labels": record["labels"],
            "job_id": record["job_id"], "node_id": record["node_id"],
            "node_ip": record["node_ip"], "worker_id": record["worker_id"],
            "actor_class": "Trainer", "task_name": "Trainer.train_step"}


class Answering(asyncio.Protocol):
    """One link's answers to the hub, as the agent's link thread gives them."""

    def __init__(self, generator: Generator, index: int) -> None:
        self.generator, self.index = generator, index
        self.stream = ControlConnection()
        self.pending = bytearray()  # bytes received before the transport was handed over
        self.transport: asyncio.WriteTransport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.WriteTransport)
        self.transport = transport
        if self.pending:
            self.data_received(bytes(self.pending))

    def data_received(self, data: bytes) -> None:
        if self.transport is None:
            self.pending += data
            return
        self.stream.receive_data(data)
        while not isinstance(message := self.stream.next_event(), NeedData):
            if isinstance(message, CollectStacks):
                stuck = self.index % STRAGGLER_EVERY == 7
                self.transport.write(self.generator.answer(message, stuck))
            elif isinstance(message, Pause):
                self.transport.write(encode_control(SessionStarted(
                    session=pause_session(self.index))))
                self.transport.write(encode_control(Paused(request_id=message.request_id)))

    def eof_received(self) -> bool | None:
        return False  # the transport closes


class Generator:
    """Live links, each answering the hub's questions as the agent's link thread does."""

    def __init__(self, worker: str, token: str) -> None:
        host, port = worker.rsplit(":", 1)
        self.host, self.port, self.token = host, int(port), token
        self.common, self.stuck = _sample_threads()
        self.writers: list[asyncio.StreamWriter] = []
        self.tasks: set[asyncio.Task[None]] = set()
        self.linked = 0
        self._encoded: dict[tuple[bool, bool, bool], str] = {}

    async def link_one(self, index: int, gate: asyncio.Semaphore) -> bool:
        async with gate:
            try:
                reader, writer = await asyncio.open_connection(self.host, self.port)
            except OSError:
                return False
            handshake = AgentHandshake(self.token, ROLE_CONTROL, hub="the hub")
            if not isinstance(await self._next(reader, handshake), Challenge):
                writer.close()
                return False
            writer.write(handshake.send())
            if not isinstance(await self._next(reader, handshake), Welcome):
                writer.close()
                return False
            record = fake_record(index)
            writer.write(encode_control(Identify(process={
                key: record[key] for key in ("pid", "host", "argv", "python")})))
            writer.write(encode_control(Register(process=record)))
            await writer.drain()
        # From here on the connection is served by callbacks (a Protocol), not a task per
        # link: a task's wake-up per message made the generator spend as much CPU as the
        # hub on the machine they share, where real workers answer on their own cores.
        answering = Answering(self, index)
        answering.data_received(handshake.take_buffered() + bytes(reader._buffer))
        writer.transport.set_protocol(answering)
        answering.connection_made(writer.transport)
        self.writers.append(writer)
        return True

    def answer(self, question: CollectStacks, stuck: bool) -> bytes:
        """The framed ``Stacks`` answer, the bytes :func:`encode_control` gives, with the
        threads' JSON encoded once: one generator answers for a thousand processes, each
        of which would encode its own on its own core."""
        key = (stuck, question.frames, question.locals)
        threads = self._encoded.get(key)
        if threads is None:
            chosen = (self.stuck if stuck else self.common) if question.frames else []
            if not question.locals:
                chosen = [{**t, "frames": [{k: v for k, v in f.items() if k != "locals"}
                                           for f in t["frames"]]} for t in chosen]
            threads = self._encoded[key] = json.dumps(chosen, separators=(",", ":"))
        body = (f'{{"type":"{Stacks.TYPE}","request_id":{question.request_id},'
                f'"threads":{threads},"now":{NOW}}}')
        return frame(body.encode(), MAX_CONTROL_MESSAGE)

    async def link(self, count: int) -> tuple[float, int]:
        gate = asyncio.Semaphore(CONNECT_CONCURRENCY)
        start = time.time()
        done = await asyncio.gather(*(self.link_one(self.linked + i, gate)
                                      for i in range(count)))
        self.linked += count
        return start, sum(1 for ok in done if not ok)

    @staticmethod
    async def _next(reader: asyncio.StreamReader, handshake: AgentHandshake) -> object:
        return await read_next(reader, handshake.receive_data, handshake.next_event)


async def generate(worker: str, token: str) -> None:
    """Serve commands from stdin: ``link N`` opens N more live links (answers ``LINKED
    start refused``); end of input closes everything."""
    generator = Generator(worker, token)
    loop = asyncio.get_running_loop()
    print("READY", flush=True)
    while command := (await loop.run_in_executor(None, sys.stdin.readline)).split():
        if command[0] == "link":
            start, refused = await generator.link(int(command[1]))
            print(f"LINKED {start} {refused}", flush=True)
    for writer in generator.writers:
        writer.close()


# -- the measures ------------------------------------------------------------------------


class LiveScale:
    """A hub subprocess, the generator, and a few real linked processes."""

    def __init__(self, total: int) -> None:
        limit = str(2 * total + 64)
        self.hub = core.start_hub("--max-agent-connections", limit, "--max-sessions", limit,
                                  "--log-level", "warning", *EXTRA_HUB_ARGS)
        self.hub_log: collections.deque[str] = collections.deque(maxlen=20)
        assert self.hub.proc.stderr is not None
        threading.Thread(target=self.hub_log.extend, args=(self.hub.proc.stderr,),
                         daemon=True).start()
        self.generator = subprocess.Popen(
            [sys.executable, __file__, "--generate", self.hub.agent_address, self.hub.token,
             str(total)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        assert core.read_line(self.generator, timeout=60).strip() == "READY"

    def get(self, path: str, timeout: float = 60) -> Any:
        return self.hub.get(path, timeout=timeout)

    def wait_processes(self, count: int, timeout: float = 120) -> float:
        """When the hub listed ``count`` processes: each change of its process list wakes
        its long-poll, then its count is read from ``/api/health``. The long-poll selects
        no process (``pid=0``), so that a wake does not encode a listing of thousands
        while the hub is being measured linking them. ``TimeoutError`` (with the hub's
        log) after ``timeout``."""
        def enough(_nothing: list[dict[str, Any]]) -> bool:
            return bool(self.get("/api/health")["live_processes"] >= count)

        try:
            wait_processes(self.hub.client_address, f"{count} processes linked", enough,
                           timeout, query="now=0&pid=0")
        except TimeoutError as error:
            raise TimeoutError(f"{error}; hub log: {list(self.hub_log)}") from None
        return time.time()

    def link(self, count: int, expected: int) -> float:
        """Link ``count`` more; processes per second until the hub lists ``expected``."""
        assert self.generator.stdin is not None
        self.generator.stdin.write(f"link {count}\n")
        self.generator.stdin.flush()
        _, start, refused = core.read_line(self.generator, timeout=300).split()
        if int(refused):
            raise RuntimeError(f"the hub refused {refused} links: {list(self.hub_log)}")
        return count / (self.wait_processes(expected) - float(start))

    def close(self) -> None:
        core.stop(self.generator)
        self.hub.close()


def cli(scale: LiveScale, *args: str) -> tuple[float, str]:
    """Seconds until the command exited, and its output. Its output goes to a file, as
    ``time raydebug ps --json > out.json`` measures it, and is read after the clock stops:
    read through a pipe by this process (``capture_output``: 32 KB reads, the writer
    blocked on a 64 KB pipe between them), 6 MB took ~70 ms more, and decoding them
    (``text=True``) ~50 ms: the reader's costs, not the command's."""
    with tempfile.TemporaryFile() as output:
        start = time.perf_counter()
        subprocess.run([sys.executable, "-m", "raydebug", *args, "--hub",
                        scale.hub.client_address], stdout=output, stderr=subprocess.PIPE,
                       check=True, timeout=120, env={**os.environ, "COLUMNS": "120"})
        seconds = time.perf_counter() - start
        output.seek(0)
        return seconds, output.read().decode()


def http_time(scale: LiveScale, path: str) -> tuple[float, Any, dict[str, float]]:
    """Seconds, the decoded answer, and the hub's own timing (``Server-Timing``)."""
    start = time.perf_counter()
    with urllib.request.urlopen(f"http://{scale.hub.client_address}{path}",
                                timeout=60) as response:
        body = response.read()
        timing = server_timing(response.headers.get("Server-Timing"))
    return time.perf_counter() - start, json.loads(body), timing


def measure_stacks(scale: LiveScale, linked: int, repeats: int) -> dict[str, Any]:
    """``GET /api/stacks`` and ``raydebug stacks`` (rendered) across every linked process."""
    http, rendered = core.Sample(), core.Sample()
    for _ in range(repeats):
        seconds, answer, _ = http_time(scale, "/api/stacks?timeout=5")
        http.values.append(seconds)
        answered = sum(1 for entry in answer["processes"] if entry["answered"])
        assert answered >= linked, f"{answered} of {linked} answered"
        seconds, shown = cli(scale, "stacks", "--timeout", "5")
        rendered.values.append(seconds)
    odd = next(line for line in shown.splitlines() if " next_batch  " in line)
    return {"http": http.summary(), "cli": rendered.summary(), "straggler_line": odd}


def measure_real(scale: LiveScale, real: list[subprocess.Popen[str]],
                 repeats: int) -> dict[str, Any]:
    """One real linked process: ``raydebug stacks pid=P`` (HTTP and CLI) vs ``py-spy dump``."""
    ours, cli_one, spy = core.Sample(), core.Sample(), core.Sample()
    py_spy = shutil.which("py-spy", path=str(Path(sys.executable).parent)) or \
        shutil.which("py-spy")
    spy_error = None if py_spy else "py-spy is not installed (pip install py-spy)"
    for _ in range(repeats):
        for proc in real:
            seconds, answer, _ = http_time(scale, f"/api/stacks?pid={proc.pid}")
            (entry,) = [e for e in answer["processes"] if e["process"]["pid"] == proc.pid]
            assert entry["answered"], entry
            ours.values.append(seconds)
            if py_spy and spy_error is None:
                start = time.perf_counter()
                done = subprocess.run([py_spy, "dump", "--pid", str(proc.pid)],
                                      capture_output=True, text=True, timeout=60)
                if done.returncode != 0 or "work" not in done.stdout:
                    spy_error = (done.stderr or done.stdout).strip().splitlines()[-1:]
                else:
                    spy.values.append(time.perf_counter() - start)
    seconds, _ = cli(scale, "stacks", f"pid={real[0].pid}")
    cli_one.values.append(seconds)
    return {"http": ours.summary(), "cli": cli_one.summary(),
            "py_spy": spy.summary() if spy.values else None, "py_spy_error": spy_error}


def measure_pause(scale: LiveScale, indexes: list[int]) -> dict[str, Any]:
    """``POST /api/pause`` of one generated process -> its session listed (long-poll)."""
    listed = core.Sample()
    for index in indexes:
        before = len(scale.get("/api/sessions"))
        start = time.perf_counter()
        request = urllib.request.Request(
            f"http://{scale.hub.client_address}/api/pause",
            data=json.dumps({"selector": [f"pid={FAKE_PID + index}"]}).encode(),
            headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(request, timeout=60) as response:
            paused = json.loads(response.read())
        assert len(paused["paused"]) == 1, paused
        sessions = scale.get(f"/api/sessions?min={before + 1}&timeout=30")
        listed.values.append(time.perf_counter() - start)
        assert any(s.get("pid") == FAKE_PID + index for s in sessions), "no session listed"
    cli_pause, out = cli(scale, "pause", f"pid={FAKE_PID + indexes[-1] + 1}")
    assert out.startswith("paused "), out
    return {"listed": listed.summary(), "cli": cli_pause}


def cpu_seconds(pid: int) -> float:
    """User + system CPU time ``pid`` has used so far (Linux ``/proc``)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def closed_port() -> int:
    """A loopback port nothing listens on (bound, then let go)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def command_time(*args: str) -> float:
    """Wall time of one command (its exit status not checked: a CLI start asks a port
    that refuses)."""
    start = time.perf_counter()
    subprocess.run(args, capture_output=True, timeout=60, check=False)
    return time.perf_counter() - start


def server_timing(header: str | None) -> dict[str, float]:
    """``ask;dur=1.5, encode;dur=2, asked;desc="7"`` -> {"ask": 0.0015, "encode": 0.002,
    "asked": 7.0} (durations in seconds; a description as the number it is)."""
    found = {}
    for part in (header or "").split(","):
        name, _, duration = part.strip().partition(";dur=")
        if duration:
            found[name] = float(duration) / 1000
        name, _, description = part.strip().partition(";desc=")
        if description:
            found[name] = float(description.strip('"'))
    return found


# Seconds before each asked listing: the one generator still answers the last listing's
# questions for a while (real workers answer on their own cores), and a user's `ps` comes
# alone, not right after another.
SETTLE = 1.5


def measure_ps(scale: LiveScale, count: int, repeats: int) -> dict[str, Any]:
    """``raydebug ps --json`` end to end (a subprocess, as a user runs it: the hub asks
    every Ray process what it runs now), and its parts, interleaved in each repeat: the
    CLI's start (the same command at a port that refuses: imports, parsing, a connect),
    Python's own start (the floor), ``GET /api/processes`` as the CLI asks it, with the
    hub's time in it (its ``Server-Timing``: asking and waiting, encoding), and the listing
    alone (``now=0``); with the CPU the hub and the generator (which shares the machine, and
    answers for all 10,000) spent on each asked listing."""
    names = ("cli", "cli_start", "python_start", "http", "hub_ask", "hub_write", "hub_encode",
             "http_listing", "hub_cpu", "generator_cpu", "stale", "asked")
    samples = {name: core.Sample() for name in names}
    refused = f"127.0.0.1:{closed_port()}"
    for _ in range(repeats):
        time.sleep(SETTLE)
        seconds, out = cli(scale, "ps", "--json")
        assert len(json.loads(out)) >= count
        samples["cli"].values.append(seconds)
        samples["cli_start"].values.append(command_time(
            sys.executable, "-m", "raydebug", "ps", "--json", "--hub", refused))
        samples["python_start"].values.append(command_time(sys.executable, "-c", "pass"))
        time.sleep(SETTLE)
        before = cpu_seconds(scale.hub.proc.pid), cpu_seconds(scale.generator.pid)
        seconds, listing, timing = http_time(scale, "/api/processes")
        samples["hub_cpu"].values.append(cpu_seconds(scale.hub.proc.pid) - before[0])
        samples["generator_cpu"].values.append(cpu_seconds(scale.generator.pid) - before[1])
        samples["stale"].values.append(sum(1 for p in listing if p.get("activity_stale")))
        assert len(listing) >= count
        samples["http"].values.append(seconds)
        samples["hub_ask"].values.append(timing.get("ask", 0.0))
        samples["hub_write"].values.append(timing.get("write", 0.0))
        samples["hub_encode"].values.append(timing.get("encode", 0.0))
        samples["asked"].values.append(timing.get("asked", 0.0))
        seconds, listing, _ = http_time(scale, "/api/processes?now=0")
        assert len(listing) >= count
        samples["http_listing"].values.append(seconds)
    table_sample = core.Sample()
    for _ in range(2):
        seconds, out = cli(scale, "ps")
        assert len(out.splitlines()) >= count + 2
        table_sample.values.append(seconds)
    narrowed, out = cli(scale, "ps", f"pid={FAKE_PID + 7}")
    assert f"{FAKE_PID + 7}" in out, out
    return {**{name: sample.summary() for name, sample in samples.items()},
            "table": table_sample.summary(), "table_title": out.splitlines()[0],
            "narrowed": narrowed}


def run(stacked: int = 1000, total: int = 10_000, real: int = 3,
        repeats: int = 5, only_ps: bool = False) -> dict[str, Any]:
    """Every measure; ``only_ps``: link ``total`` and measure ``ps`` alone."""
    raise_fd_limit(total + 512)  # each process: the hub holds one socket a link, the generator one
    os.environ.setdefault("XDG_STATE_HOME", tempfile.mkdtemp(prefix="raydebug-bench-state-"))
    load = [os.getloadavg()[0]]
    scale = LiveScale(total)
    workers: list[subprocess.Popen[str]] = []
    results: dict[str, Any] = {"stacked": stacked, "total": total, "real": real,
                               "load_average": load}
    try:
        results["hub_rss_mb_idle"] = core.rss_kib(scale.hub.proc.pid) * 1024 / 1e6
        if not only_ps:
            script = Path(tempfile.mkdtemp(prefix="raydebug-bench-live-")) / "work.py"
            script.write_text(REAL_SCRIPT)
            workers = [scale.hub.spawn(script, RAYDEBUG_LIVE="1") for _ in range(real)]
            for proc in workers:
                assert core.read_line(proc, timeout=60).strip() == "ready"
            scale.wait_processes(real)
            results["real_one"] = measure_real(scale, workers, repeats)
            results["registration_rate_first"] = scale.link(stacked, stacked + real)
            results["stacks"] = measure_stacks(scale, stacked, repeats)
        else:
            real = results["real"] = 0
            stacked = 0
        results["registration_rate_rest"] = scale.link(total - stacked, total + real)
        results["hub_rss_mb_full"] = core.rss_kib(scale.hub.proc.pid) * 1024 / 1e6
        results["ps"] = measure_ps(scale, total, repeats)
        if not only_ps:
            results["pause"] = measure_pause(scale, [100 * i + 1 for i in range(repeats)])
        results["hub_peak_rss_mb"] = core.status_kib(scale.hub.proc.pid, "VmHWM") * 1024 / 1e6
        load.append(os.getloadavg()[0])
        return results
    finally:
        scale.close()


def table(results: dict[str, Any]) -> str:
    """The section's table, in the style of bench/run.py's."""
    def ms(summary: dict[str, Any] | None) -> str:
        return f"{summary['median'] * 1000:.1f} ms" if summary else "-"

    stacked, total = f"{results['stacked']:,}", f"{results['total']:,}"
    ps = results["ps"]
    rows = [("measure (live processes)", "raydebug", "baseline", "target")]
    if "stacks" in results:
        real = results["real_one"]
        spy = real["py_spy"]
        spy_total = (f"{spy['median'] * results['stacked']:.1f} s (x{stacked}, one at a time)"
                     if spy else f"n/a: {real['py_spy_error']}")
        rows += [
            (f"stacks of {stacked} linked: GET /api/stacks", ms(results["stacks"]["http"]),
             spy_total, "<= 1 s"),
            (f"stacks of {stacked} linked: raydebug stacks", ms(results["stacks"]["cli"]),
             "py-spy dump", "<= 1 s"),
            ("stacks of one real process (HTTP)", ms(real["http"]),
             f"{ms(spy)} py-spy dump", "-"),
            ("stacks of one real process (CLI)", ms(real["cli"]), "-", "-"),
        ]
    rows += [
        (f"register {total} live links",
         f"{results['registration_rate_rest']:.0f} processes/s", "n/a", "-"),
        (f"ps among {total}: raydebug ps --json", ms(ps["cli"]),
         f"{ms(ps['python_start'])} python -c pass", "<= 300 ms"),
        ("  its parts: CLI start (same command, no hub)", ms(ps["cli_start"]), "-", "-"),
        ("  GET /api/processes (as the CLI asks)", ms(ps["http"]), "-", "-"),
        ("  in the hub: ask+wait (writing) / encode",
         f"{ms(ps['hub_ask'])} ({ms(ps['hub_write'])}) / {ms(ps['hub_encode'])}", "-", "-"),
        ("  GET /api/processes?now=0 (listing alone)", ms(ps["http_listing"]), "-", "-"),
        ("  CPU in a GET: hub / load generator", f"{ms(ps['hub_cpu'])} / "
         f"{ms(ps['generator_cpu'])}", "-", "-"),
        ("  asked in it / listed with activity_stale",
         f"{ps['asked']['median']:.0f} / {ps['stale']['median']:.0f}", "-", "-"),
        (f"ps among {total}: raydebug ps (table)", ms(ps["table"]), "-", "-"),
        (f"ps pid=P among {total} (table)", f"{ps['narrowed'] * 1000:.0f} ms", "-", "-"),
    ]
    if "pause" in results:
        rows += [
            (f"pause one among {total} -> session listed", ms(results["pause"]["listed"]),
             "n/a", "<= 300 ms"),
            (f"pause one among {total}: raydebug pause",
             f"{results['pause']['cli'] * 1000:.0f} ms", "n/a", "-"),
        ]
    rows.append((f"hub RSS: idle / {total} linked (peak)",
                 f"{results['hub_rss_mb_idle']:.0f} / {results['hub_rss_mb_full']:.0f} MB "
                 f"({results['hub_peak_rss_mb']:.0f})", "n/a", "<= 500 MB"))
    before, after = results["load_average"]
    rows.append((f"(load average {before:.1f} before, {after:.1f} after, "
                 f"{os.cpu_count()} CPUs)", "", "", ""))
    widths = [max(len(row[i]) for row in rows[:-1]) for i in range(4)]
    return "\n".join("  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True))
                     .rstrip() for row in rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--generate", nargs=3, metavar=("WORKER", "TOKEN", "COUNT"),
                        help="Be the load generator (driven through stdin).")
    parser.add_argument("--stacked", type=int, default=1000)
    parser.add_argument("--total", type=int, default=10_000)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--only-ps", action="store_true",
                        help="Link --total processes and measure ps alone.")
    args = parser.parse_args()
    if args.generate:
        worker, token, count = args.generate
        raise_fd_limit(int(count) + 256)
        asyncio.run(generate(worker, token))
        return
    results = run(args.stacked, args.total, repeats=args.repeats, only_ps=args.only_ps)
    print(json.dumps(results, indent=1))
    print(table(results))


if __name__ == "__main__":
    main()
