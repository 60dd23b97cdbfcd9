"""Real processes for tests and benchmarks: a hub subprocess, debugged scripts, bounded waits."""

from __future__ import annotations

import asyncio
import json
import os
import selectors
import shutil
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
import urllib.request
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from raydebug.client.dap import DapClient

from .long_poll import TIMEOUT, wait_listing

PAUSING_WORKER = """
value = 41
breakpoint()
print("finished", value + 1, flush=True)
"""

# A live process (it links at its start) whose "blocked-worker" thread waits in C on an event
# nobody sets while its main thread loops: a pause makes that thread a session blocked in C.
BLOCKED_WORKER = """
import os, threading, time
from raydebug.agent import start_live_link

start_live_link()  # as RAYDEBUG_LIVE=1 does where raydebug's .pth is installed (not 3.12's)

done = threading.Event()

def worker():
    waiting_for = "done"
    done.wait()  # blocked in C until the event is set
    after = waiting_for + " was set"
    print("worker:", after, flush=True)

thread = threading.Thread(target=worker, name="blocked-worker")
thread.start()
print("started", os.getpid(), flush=True)
total = 0
while thread.is_alive():
    total += 1
    time.sleep(0.01)
print("finished", total > 0, flush=True)
"""


def run(coro: Coroutine[Any, Any, Any], timeout: float = 60.0) -> Any:
    """Run an async test body with an overall bound."""
    return asyncio.run(asyncio.wait_for(coro, timeout))


def read_line(proc: subprocess.Popen[str], timeout: float = TIMEOUT) -> str:
    """The next line of ``proc.stdout`` ("" at its end), waiting at most ``timeout`` seconds
    (then ``TimeoutError``). Read by ``readline()`` on a thread, not after a ``select()`` on
    the descriptor: a text stream's ``readline()`` takes every line the pipe holds into its
    buffer, where ``select()`` never sees the next one; a process that printed two lines at
    once and then paused left its reader waiting for nothing (a fresh-clone run: 300 s for
    "waiting for a debugger", already read). After a timeout that thread may still take the
    next line: a timeout ends the test."""
    stream = proc.stdout
    assert stream is not None
    read: list[str | BaseException] = []

    def read_one() -> None:
        try:
            read.append(stream.readline())
        except BaseException as error:  # a closed stream: said to the caller
            read.append(error)

    reader = threading.Thread(target=read_one, name=f"read_line {proc.pid}", daemon=True)
    reader.start()
    reader.join(timeout)
    if not read:
        raise TimeoutError(f"no output from pid {proc.pid} within {timeout}s")
    if isinstance(read[0], BaseException):
        raise read[0]
    return read[0]


def next_line(proc: subprocess.Popen[bytes], timeout: float = TIMEOUT) -> str:
    """The next line ``proc`` printed, for a process started with ``bufsize=0`` and a byte
    stdout: select() and a byte-wise readline() never leave a line behind in a buffer
    (:func:`read_line`'s text stream can). Raises ``TimeoutError`` after ``timeout``."""
    assert proc.stdout is not None
    with selectors.DefaultSelector() as selector:
        selector.register(proc.stdout, selectors.EVENT_READ)
        if not selector.select(timeout):
            raise TimeoutError(f"no output from pid {proc.pid} within {timeout}s")
    return proc.stdout.readline().decode()


def stop(proc: subprocess.Popen[Any]) -> None:
    """Stop a process we started, by pid, and reap it."""
    if proc.poll() is None:
        proc.kill()
    proc.wait(timeout=TIMEOUT)


@dataclass
class HubProcess:
    """A real ``raydebug hub`` subprocess on free loopback ports. ``state``: its
    ``XDG_STATE_HOME``, which what runs through it shares (its state file names it to them,
    not to a user's or another test's commands); removed at :meth:`close` if ``removes_state``."""

    proc: subprocess.Popen[str]
    client: tuple[str, int]
    worker: tuple[str, int]
    token: str
    workers: list[subprocess.Popen[str]] = field(default_factory=list)
    cert: str | None = None  # the fingerprint a hub started with --tls printed
    state: Path | None = None
    removes_state: bool = False

    @property
    def client_address(self) -> str:
        return "{}:{}".format(*self.client)

    @property
    def agent_address(self) -> str:
        return "{}:{}".format(*self.worker)

    def env(self, **extra: str) -> dict[str, str]:
        env = dict(os.environ)
        env.pop("RAYDEBUG_WAIT_TIMEOUT", None)
        env.update(PYTHONBREAKPOINT="raydebug.set_trace", RAYDEBUG_HUB=self.agent_address,
                   RAYDEBUG_TOKEN=self.token, PYDEVD_DISABLE_FILE_VALIDATION="1",
                   PYTHONUNBUFFERED="1")
        if self.cert:
            env["RAYDEBUG_HUB_CERT"] = self.cert
        if self.state:
            env["XDG_STATE_HOME"] = str(self.state)
        env.update(extra)
        return env

    def ray_driver_env(self, **extra: str) -> dict[str, str]:
        """:meth:`env` for a Ray driver a test runs itself, with no breakpoint hook, live
        link, post-mortem or ``RAY_ADDRESS`` from this process's environment: the job says
        in its runtime env what its workers get."""
        env = self.env(RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER="0", **extra)
        for name in ("PYTHONBREAKPOINT", "RAYDEBUG_LIVE", "RAYDEBUG_POST_MORTEM", "RAY_ADDRESS"):
            env.pop(name, None)
        return env

    def spawn(self, script: Path, *args: str, **env: str) -> subprocess.Popen[str]:
        """Start ``python script`` pointed at this hub; stopped at teardown."""
        proc = subprocess.Popen([sys.executable, str(script), *args], env=self.env(**env),
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.workers.append(proc)
        return proc

    def spawn_linked(self, script: Path, python: str = sys.executable,
                     **env: str) -> subprocess.Popen[str]:
        """Start ``python script`` with the live link (``RAYDEBUG_LIVE=1``) and, once the hub
        lists it live (so with the cluster's breakpoints armed: the hub sends them before
        the process registers), write a line to its stdin: a script that waits in
        ``input()`` goes on armed. Stopped at teardown."""
        proc = subprocess.Popen([python, str(script)],
                                env=self.env(RAYDEBUG_LIVE="1", **env), stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.workers.append(proc)
        self.wait_processes(f"pid {proc.pid} links", lambda ps: [
            p for p in ps if p.get("live") and p.get("pid") == proc.pid])
        assert proc.stdin is not None
        proc.stdin.write("\n")
        proc.stdin.flush()
        return proc

    def run_unserved(self, directory: Path, wait_timeout: str = "3", **env: str) -> str:
        """Run :data:`PAUSING_WORKER` where this hub cannot serve it: it must continue after
        its wait timeout, finish, and print no traceback. Return its stderr (the why)."""
        proc = self.spawn(write_script(directory, "unserved.py", PAUSING_WORKER),
                          RAYDEBUG_WAIT_TIMEOUT=wait_timeout, **env)
        code, out, err = finish(proc)
        assert code == 0 and "finished 42" in out, err
        assert "Traceback" not in err, err
        return err

    def get(self, path: str, timeout: float = TIMEOUT) -> Any:
        with urllib.request.urlopen(f"http://{self.client_address}{path}",
                                    timeout=timeout + 5) as response:
            return json.loads(response.read())

    def wait_processes(self, what: str, check: Callable[[list[dict[str, Any]]], Any],
                       timeout: float = TIMEOUT, query: str = "now=0") -> Any:
        """:func:`wait_processes` on this hub."""
        return wait_processes(self.client_address, what, check, timeout, query)

    def wait_listing(self, path: str, what: str, check: Callable[[Any], Any],
                     timeout: float = TIMEOUT) -> Any:
        """:func:`wait_listing` on this hub: ``path`` is one of its listings that long-poll
        (``/api/processes``, ``/api/sessions``, ``/api/breakpoints``)."""
        return wait_listing(self.client_address, path, what, check, timeout)

    def wait_linked(self, count: int, timeout: float = TIMEOUT) -> list[dict[str, Any]]:
        """Long-poll the hub until it lists at least ``count`` live processes (each armed
        at its link's connect: the hub sends the cluster's breakpoints right after a process
        identifies itself, before it registers); return them. ``TimeoutError`` after
        ``timeout``."""
        def live(processes: list[dict[str, Any]]) -> list[dict[str, Any]] | None:
            found = [p for p in processes if p.get("live")]
            return found if len(found) >= count else None

        return list(self.wait_processes(f"{count} processes linked", live, timeout))

    def wait_sessions(self, count: int, timeout: float = TIMEOUT,
                      state: str | None = None) -> list[dict[str, Any]]:
        """Long-poll the hub until exactly ``count`` sessions (in ``state``) exist."""
        deadline = time.monotonic() + timeout
        only = f"&state={state}" if state else ""
        while True:
            remaining = deadline - time.monotonic()
            sessions: list[dict[str, Any]] = self.get(
                f"/api/sessions?min={count}&max={count}&timeout={max(remaining, 0.1):.2f}{only}")
            if len(sessions) == count:
                return sessions
            if remaining <= 0:
                raise TimeoutError(f"expected {count} sessions, the hub has {len(sessions)}")

    async def dap(self) -> DapClient:
        client = await DapClient.connect(*self.client)
        await client.initialize()
        return client

    def evaluate_and_detach(self, session_id: str, expression: str) -> str:
        """Attach, evaluate ``expression`` in the paused frame, detach; return the result."""
        async def cycle() -> str:
            client = await self.dap()
            stopped = await client.attach(session_id)
            frames = await client.request("stackTrace", {"threadId": stopped.body["threadId"]})
            value = await client.request("evaluate", {
                "expression": expression, "frameId": frames["stackFrames"][0]["id"],
                "context": "repl"})
            await client.request("disconnect", {})
            await client.close()
            return str(value["result"])

        return str(run(cycle()))

    def attach_and_detach(self, session_id: str) -> None:
        """Attach to a session until it stops, then detach (so the worker runs on)."""
        async def cycle() -> None:
            client = await self.dap()
            await client.attach(session_id)
            await client.request("disconnect", {})
            await client.close()

        run(cycle())

    def stop_and_read_log(self) -> str:
        """Stop the hub (and its workers); return what it logged."""
        for proc in self.workers:
            stop(proc)
        self.proc.terminate()
        _, errors = self.proc.communicate(timeout=TIMEOUT)
        return str(errors)

    def __enter__(self) -> HubProcess:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def close(self) -> None:
        for proc in self.workers:
            stop(proc)
        if self.proc.poll() is None:
            self.proc.terminate()  # a clean exit: the hub removes its state file
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                pass
        stop(self.proc)
        if self.state and self.removes_state:
            shutil.rmtree(self.state, ignore_errors=True)


def wait_processes(client_address: str, what: str,
                   check: Callable[[list[dict[str, Any]]], Any], timeout: float = TIMEOUT,
                   query: str = "now=0") -> Any:
    """Long-poll the hub's ``/api/processes?QUERY`` until ``check(processes)`` is true, and
    return its value (:func:`wait_listing`). It wakes on each change of the hub's processes
    or sessions, so a ``check`` may read the sessions too."""
    return wait_listing(client_address, f"/api/processes?{query}", what, check, timeout)


def raydebug(hub: HubProcess, *args: str) -> subprocess.CompletedProcess[str]:
    """``raydebug ARGS --hub HUB`` as a user runs it against ``hub`` (colours off, 160
    columns, its state directory); what it printed and its exit code, within :data:`TIMEOUT`."""
    state = {"XDG_STATE_HOME": str(hub.state)} if hub.state else {}
    return subprocess.run([sys.executable, "-m", "raydebug", *args, "--hub", hub.client_address],
                          capture_output=True, text=True, timeout=TIMEOUT,
                          env={**os.environ, "NO_COLOR": "1", "COLUMNS": "160", **state})


def ask_until(what: str, check: Callable[[], Any], timeout: float = 180) -> Any:
    """Call ``check()`` until it returns something true, and return that; ``TimeoutError``
    naming ``what`` after ``timeout``. Only for what nothing can push: what a process runs
    now and where its threads are are asked of it at each call. A change of the hub's
    processes or sessions is waited on instead (:func:`wait_processes`)."""
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise TimeoutError(what)
        time.sleep(0.25)  # asked, not pushed: see the docstring


def start_hub(*args: str, token: str = "test-token", state: Path | None = None) -> HubProcess:
    """A ``raydebug hub ARGS`` on free loopback ports; ``RuntimeError`` with its stderr if
    it does not start. Its state directory is ``state`` (hubs that share one on purpose)
    or, by default, a temporary one of its own, removed at its close (:class:`HubProcess`)."""
    removes_state = state is None
    state = state or Path(tempfile.mkdtemp(prefix="raydebug-hub-state-"))
    proc = subprocess.Popen(
        [sys.executable, "-m", "raydebug", "hub", "--port", "0", "--agent-port", "0",
         "--token", token, *args],
        env={**os.environ, "XDG_STATE_HOME": str(state)},
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        banner = read_line(proc)
        # "raydebug hub ready: clients HOST:PORT agents HOST:PORT"
        words = banner.split()
        client, worker = words[4], words[6]
        # "Agents connect over TLS; certificate sha256:...": the same write as the first
        # line (one flush of less than PIPE_BUF), so already buffered
        assert proc.stdout is not None
        cert = proc.stdout.readline().split()[-1] if "--tls" in args else None
    except (TimeoutError, IndexError):
        stop(proc)
        if removes_state:
            shutil.rmtree(state, ignore_errors=True)
        error = proc.stderr.read() if proc.stderr else ""
        raise RuntimeError(f"the hub did not start: {error}") from None
    host, port = client.rsplit(":", 1)
    whost, wport = worker.rsplit(":", 1)
    return HubProcess(proc, (host, int(port)), (whost, int(wport)), token, cert=cert,
                      state=state, removes_state=removes_state)


def write_script(directory: Path, name: str, source: str) -> Path:
    path = directory / name
    path.write_text(textwrap.dedent(source).lstrip())
    return path


def line_of(path: Path, marker: str) -> int:
    """1-based number of the first line of ``path`` containing ``marker``."""
    for number, line in enumerate(path.read_text().splitlines(), start=1):
        if marker in line:
            return number
    raise ValueError(f"{marker!r} not in {path}")


def finish(proc: subprocess.Popen[str], timeout: float = TIMEOUT) -> tuple[int, str, str]:
    """Wait for a debugged process to exit; return (code, stdout, stderr)."""
    out, err = proc.communicate(timeout=timeout)
    return proc.returncode, out, err


def listening_ports(pid: int) -> list[tuple[str, int]]:
    """The (address, port) pairs on which process ``pid`` has a listening TCP socket."""
    inodes = set()
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        try:
            target = os.readlink(fd)
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(target[8:-1])
    found = []
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            fields = line.split()
            local, state, inode = fields[1], fields[3], fields[9]
            if state == "0A" and inode in inodes:  # 0A: LISTEN
                address, port = local.rsplit(":", 1)
                found.append((address, int(port, 16)))
    return found
