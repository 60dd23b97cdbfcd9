"""Measures 7 and 8: one hub holding 1,000 paused sessions, and how fast a killed worker's
session leaves the list.

A load generator (this file run with ``--generate``: one process, asyncio) opens N real TCP
connections to a real hub subprocess's agent listener and speaks the real link protocol
on each: the agent's side of the real mutual handshake (protocol/handshake.py: it answers
the Challenge and checks the hub's proof), then Identify and a SessionStarted with a session
like the agent sends from a Ray task. Among those sessions,
a few real processes pause in ``breakpoint()`` with ``PYTHONBREAKPOINT=raydebug.set_trace``;
the benchmark attaches to them through the crowded hub, then SIGKILLs them.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import json
import os
import resource
import secrets
import signal
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
from devtools.processes import run as run_async
from raydebug.client.dap import DapClient
from raydebug.hub.net import read_next
from raydebug.protocol.control import (
    ROLE_CONTROL,
    Challenge,
    Identify,
    SessionStarted,
    Welcome,
    encode_control,
)
from raydebug.protocol.handshake import AgentHandshake

# More hub settings, if a run needs them: BENCH_HUB_ARGS="--flag value".
EXTRA_HUB_ARGS = os.environ.get("BENCH_HUB_ARGS", "").split()
CONNECT_CONCURRENCY = 64  # in-flight handshakes; asyncio's listen backlog is 100


def raise_fd_limit(needed: int) -> int:
    """Raise this process's soft RLIMIT_NOFILE (children inherit it); return the new value."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    wanted = hard if hard == resource.RLIM_INFINITY else max(soft, min(hard, needed))
    if wanted != soft:
        resource.setrlimit(resource.RLIMIT_NOFILE, (wanted, hard))
    if wanted < needed:
        raise RuntimeError(f"need {needed} file descriptors; the hard limit is {hard}")
    return wanted


# -- the load generator ------------------------------------------------------------------

ARGV = ["/usr/bin/python3", "-u", "/opt/conda/lib/python3.11/site-packages/ray/_private/"
        "workers/default_worker.py", "--node-ip-address=10.0.3.17", "--node-manager-port=40219",
        "--object-store-name=/tmp/ray/session_2024/sockets/plasma_store",
        "--raylet-name=/tmp/ray/session_2024/sockets/raylet", "--redis-address=None",
        "--metrics-agent-port=52365", "--runtime-env-agent-port=61234", "--logging-rotate-bytes"
        "=536870912", "--logging-rotate-backup-count=5", "--gcs-address=10.0.3.1:6379",
        "--session-name=session_2024-05-01_10-00-00_000000_1", "--temp-dir=/tmp/ray",
        "--webui=127.0.0.1:8265", "--cluster-id=3f1c", "--startup-token=17",
        "--worker-launch-time-ms=1714550400000", "--language=PYTHON"]


def fake_process(index: int) -> dict[str, Any]:
    """What the agent's Identify says about its process (its ``ProcessRecord``'s
    ``to_dict(IDENTIFY_FIELDS)``: see raydebug.process_record)."""
    return {"pid": 10_000 + index, "host": f"worker-{index // 16:03d}", "argv": ARGV,
            "python": "3.11.7"}


def fake_session(index: int) -> dict[str, Any]:
    """A session as an agent in a Ray task sends it (PausedThread.to_dict())."""
    root = f"/tmp/ray/session_2024/runtime_resources/working_dir_files/_ray_pkg_{index:08x}"
    return {
        "id": secrets.token_hex(6), "pid": 10_000 + index, "host": f"worker-{index // 16:03d}",
        "file": f"{root}/train/step.py", "line": 120 + index % 50, "function": "train_step",
        "reason": "breakpoint", "exception": None,
        "source": "breakpoint()  # look at the batch before the loss", "thread": "MainThread",
        "since": time.time(), "argv": ARGV, "labels": {"rank": str(index)},
        "job_id": "02000000", "task_id": secrets.token_hex(24),
        "task_name": "Trainer.train_step", "actor_id": secrets.token_hex(16),
        "actor_class": "Trainer", "node_id": secrets.token_hex(28),
        "node_ip": f"10.0.{index // 256}.{index % 256}", "worker_id": secrets.token_hex(28),
        "attempt": 0, "remote_root": root,
    }


async def register_one(host: str, port: int, token: str, index: int,
                       gate: asyncio.Semaphore) -> asyncio.StreamWriter | None:
    """Connect, authenticate and register one paused session; None if the hub refused."""
    async with gate:
        try:
            reader, writer = await asyncio.open_connection(host, port)
        except OSError:
            return None
        handshake = AgentHandshake(token, ROLE_CONTROL, hub=f"the hub at {host}:{port}")
        if not isinstance(await _next(reader, handshake), Challenge):
            writer.close()
            return None
        writer.write(handshake.send())
        if not isinstance(await _next(reader, handshake), Welcome):  # the hub is proven
            writer.close()
            return None
        writer.write(encode_control(Identify(process=fake_process(index))))
        writer.write(encode_control(SessionStarted(session=fake_session(index))))
        await writer.drain()
        return writer


async def _next(reader: asyncio.StreamReader, handshake: AgentHandshake) -> object:
    """The handshake's next event (a refusal included); raises if the hub fails its proof."""
    return await read_next(reader, handshake.receive_data, handshake.next_event)


async def generate(worker: str, token: str, count: int) -> None:
    """Serve commands from stdin: ``register`` opens ``count`` sessions (answers ``SENT start
    end refused``), ``drop`` closes them (``DROPPED``); end of input closes everything."""
    host, port = worker.rsplit(":", 1)
    loop = asyncio.get_running_loop()
    writers: list[asyncio.StreamWriter] = []
    while command := (await loop.run_in_executor(None, sys.stdin.readline)).strip():
        if command == "register":
            gate = asyncio.Semaphore(CONNECT_CONCURRENCY)
            start = time.time()
            done = await asyncio.gather(*(register_one(host, int(port), token, index, gate)
                                          for index in range(count)))
            writers = [w for w in done if w is not None]
            print(f"SENT {start} {time.time()} {count - len(writers)}", flush=True)
        elif command == "drop":
            for writer in writers:
                writer.close()
            writers = []
            print("DROPPED", flush=True)


# -- the measures ------------------------------------------------------------------------

class Scale:
    """A hub subprocess, real paused workers, and the generator, with their measures."""

    def __init__(self, sessions: int, real: int) -> None:
        self.count, self.real = sessions, real
        # Every generated connection comes from 127.0.0.1, where a cluster spreads its
        # workers over its nodes' addresses: raise the per-address limit accordingly.
        limit = str(2 * (sessions + real))
        self.hub = core.start_hub("--max-sessions", limit, "--max-agent-connections", limit,
                                  "--log-level", "warning", *EXTRA_HUB_ARGS)
        # The hub writes warnings to a pipe: read it, or a burst of them would block the hub.
        self.hub_log: collections.deque[str] = collections.deque(maxlen=20)
        assert self.hub.proc.stderr is not None
        threading.Thread(target=self.hub_log.extend, args=(self.hub.proc.stderr,),
                         daemon=True).start()
        self.generator: subprocess.Popen[str] | None = None

    def sessions(self, query: str = "") -> list[dict[str, Any]]:
        return list(self.hub.get(f"/api/sessions{query}", timeout=60))

    def wait_count(self, count: int, timeout: float = 60, state: str = "") -> float:
        """Long-poll until exactly ``count`` sessions (in ``state``); return when it answered."""
        only = f"&state={state}" if state else ""
        deadline = time.monotonic() + timeout
        while len(self.sessions(f"?min={count}&max={count}&timeout=10{only}")) != count:
            if time.monotonic() > deadline:
                health = self.hub.get("/api/health")
                raise TimeoutError(f"the hub did not reach {count} sessions: {health}; "
                                   f"hub log: {list(self.hub_log)}")
        return time.time()

    def start_generator(self) -> None:
        self.generator = subprocess.Popen(
            [sys.executable, __file__, "--generate", self.hub.agent_address, self.hub.token,
             str(self.count)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)

    def command(self, command: str) -> list[str]:
        assert self.generator is not None and self.generator.stdin is not None
        self.generator.stdin.write(command + "\n")
        self.generator.stdin.flush()
        return core.read_line(self.generator, timeout=120).split()

    def register(self) -> float:
        """Register ``count`` sessions at once; return sessions per second until all listed."""
        _, start, _, refused = self.command("register")
        if int(refused):
            raise RuntimeError(f"the hub refused {refused} of {self.count} generated workers "
                               f"(set hub flags with BENCH_HUB_ARGS): {list(self.hub_log)}")
        listed = self.wait_count(self.count + self.real)
        return self.count / (listed - float(start))

    def close(self) -> None:
        if self.generator is not None:
            core.stop(self.generator)
        self.hub.close()


def time_list(scale: Scale, repeats: int) -> tuple[core.Sample, core.Sample]:
    """``GET /api/sessions`` over HTTP, and ``raydebug list --json`` end to end."""
    expected = scale.count + scale.real
    http, cli = core.Sample(), core.Sample()
    for _ in range(repeats):
        start = time.perf_counter()
        with urllib.request.urlopen(f"http://{scale.hub.client_address}/api/sessions",
                                    timeout=30) as response:
            body = response.read()
        http.values.append(time.perf_counter() - start)
        assert len(json.loads(body)) == expected
    for _ in range(max(3, repeats // 2)):
        # Its output to a file, read after the clock stops, as ``time raydebug list --json
        # > out.json`` measures it (see live_scale.cli: a pipe's reader costs the reader).
        with tempfile.TemporaryFile() as output:
            cli.values.append(core.run_timed([sys.executable, "-m", "raydebug", "list",
                                              "--json", "--hub", scale.hub.client_address],
                                             timeout=60, stdout=output))
            output.seek(0)
            assert len(json.loads(output.read())) == expected
    return http, cli


async def attach_once(scale: Scale, session_id: str) -> float:
    """Connect -> initialize -> attach -> ``stopped`` -> stackTrace answered; then resume."""
    start = time.perf_counter()
    client = await DapClient.connect(*scale.hub.client)
    await client.initialize()
    stopped = await client.attach(session_id)
    thread_id = stopped.body["threadId"]
    await client.request("stackTrace", {"threadId": thread_id})
    elapsed = time.perf_counter() - start
    await client.request("disconnect", {})  # resumes: the worker pauses again next round
    await client.close()
    return elapsed


def real_waiting(scale: Scale, pids: set[int]) -> list[dict[str, Any]]:
    sessions = scale.sessions(f"?min={scale.count + scale.real}&state=waiting&timeout=30")
    return [s for s in sessions if s["pid"] in pids]


def measure_attach(scale: Scale, workers: list[subprocess.Popen[str]],
                   rounds: int) -> core.Sample:
    pids = {proc.pid for proc in workers}
    sample = core.Sample()
    for _ in range(rounds):
        for session in real_waiting(scale, pids):
            sample.values.append(run_async(attach_once(scale, session["id"])))
    return sample


def measure_kill(scale: Scale, workers: list[subprocess.Popen[str]]) -> core.Sample:
    """SIGKILL each paused real worker; time until a long-poll lists its session no more."""
    sample = core.Sample()
    for proc in workers:
        before = len(scale.sessions())
        start = time.perf_counter()
        os.kill(proc.pid, signal.SIGKILL)
        remaining = scale.sessions(f"?max={before - 1}&timeout=30")
        sample.values.append(time.perf_counter() - start)
        assert all(s["pid"] != proc.pid for s in remaining), "still listed after 30 s"
        proc.wait(timeout=30)
    return sample


def run(sessions: int = 1000, real: int = 5, repeats: int = 5, attach_rounds: int = 2,
        list_repeats: int = 10) -> dict[str, Any]:
    raise_fd_limit(2 * (sessions + real) + 256)  # the generator's sockets and the hub's
    os.environ.setdefault("XDG_STATE_HOME", tempfile.mkdtemp(prefix="raydebug-bench-state-"))
    scale = Scale(sessions, real)
    try:
        rss_idle = core.rss_kib(scale.hub.proc.pid)
        # Each pauses attach_rounds times to be attached to, then once more to be killed.
        workers = [scale.hub.spawn(core.TARGET, "raydebug", str(attach_rounds + 1))
                   for _ in range(real)]
        scale.wait_count(real, state="waiting")
        scale.start_generator()
        rates = core.Sample()
        for repeat in range(repeats):
            if repeat:
                scale.command("drop")
                scale.wait_count(real)
            rates.values.append(scale.register())
        http, cli = time_list(scale, list_repeats)
        attach = measure_attach(scale, workers, attach_rounds)
        rss_full = core.rss_kib(scale.hub.proc.pid)
        peak = core.status_kib(scale.hub.proc.pid, "VmHWM")
        scale.command("drop")  # the kill measure times the hub's own detection, not listing
        scale.wait_count(real, state="waiting")
        kill = measure_kill(scale, workers)
        return {
            "sessions": sessions, "real_workers": real,
            "registration_rate": rates.summary(),
            "list_http": http.summary(), "list_cli": cli.summary(),
            "hub_rss_mb_idle": rss_idle * 1024 / 1e6,
            "hub_rss_mb_full": rss_full * 1024 / 1e6,
            "hub_peak_rss_mb": peak * 1024 / 1e6,
            "attach_to_stack": attach.summary(),
            "kill_to_gone": kill.summary(),
        }
    except BaseException:
        # What the hub and the real workers said, for the failure's why (their pipes are
        # read once they are stopped).
        print(f"hub log (last lines): {list(scale.hub_log)}", file=sys.stderr)
        scale.close()
        for proc in scale.hub.workers:
            _, err = proc.communicate(timeout=30)
            print(f"worker {proc.pid} (exit {proc.returncode}) said:\n{err[-3000:]}",
                  file=sys.stderr)
        raise
    finally:
        scale.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--generate", nargs=3, metavar=("WORKER", "TOKEN", "COUNT"),
                        help="Be the load generator (driven through stdin).")
    parser.add_argument("--sessions", type=int, default=1000)
    args = parser.parse_args()
    if args.generate:
        worker, token, count = args.generate
        raise_fd_limit(int(count) + 256)
        asyncio.run(generate(worker, token, int(count)))
    else:
        print(json.dumps(run(args.sessions), indent=1))


if __name__ == "__main__":
    main()
