"""A standalone hub killed and started again on the same address gets back the processes
paused under the previous one: it serves with the token they hold (kept in the state
directory). A hub started there with another token is said to have changed it, once, and
logs its refusals of them once."""

from __future__ import annotations

import os
import selectors
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from helpers import PAUSING_WORKER, TIMEOUT, HubProcess, finish, read_line, stop, write_script

pytestmark = pytest.mark.integration

BACK_WITHIN = 15.0  # s: the link retries every 5 s at most, and a hub starts in ~1 s


def start_hub(env: dict[str, str], agent_port: int = 0, *args: str) -> HubProcess:
    """``raydebug hub`` with no --token (unless in ``args``), on ``agent_port``; retried
    while a killed hub's port is still being freed."""
    deadline = time.monotonic() + 10
    while True:
        proc = subprocess.Popen([sys.executable, "-m", "raydebug", "hub", "--port", "0",
                                 "--agent-port", str(agent_port), *args], env=env,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            words = read_line(proc, timeout=10).split()
            export = ""
            while "RAYDEBUG_TOKEN=" not in export:  # the banner's `export ...` line
                assert proc.stdout is not None  # (the banner is one write: read already)
                export = proc.stdout.readline()
            token = export.split("RAYDEBUG_TOKEN=")[1].split()[0]
        except (IndexError, TimeoutError):
            stop(proc)
            if time.monotonic() > deadline:
                raise
            continue
        host, port = words[4].rsplit(":", 1)
        whost, wport = words[6].rsplit(":", 1)
        return HubProcess(proc, (host, int(port)), (whost, int(wport)), token)


def wait_for_line(proc: subprocess.Popen[str], text: str,
                  timeout: float = TIMEOUT) -> tuple[str, str]:
    """The first line of ``proc``'s stderr that contains ``text`` (bounded), and what was
    read past it. Read from the descriptor: a text stream's buffer would hide lines from
    the selector."""
    assert proc.stderr is not None
    deadline, read = time.monotonic() + timeout, ""
    with selectors.DefaultSelector() as selector:
        selector.register(proc.stderr, selectors.EVENT_READ)
        while selector.select(max(deadline - time.monotonic(), 0)):
            chunk = os.read(proc.stderr.fileno(), 65536).decode()
            read += chunk
            for number, line in enumerate(lines := read.split("\n")):
                if text in line and number < len(lines) - 1:
                    return line, "\n".join(lines[number + 1:])
            if not chunk:
                break
    raise TimeoutError(f"{text!r} not said within {timeout} s: {read}")


@pytest.fixture
def machine(tmp_path: Path) -> dict[str, str]:
    """This machine's environment with its own state directory, no hub named in it."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAYDEBUG_")}
    return {**env, "XDG_STATE_HOME": str(tmp_path / "state"), "PYTHONUNBUFFERED": "1"}


def paused_worker(machine: dict[str, str], directory: Path,
                  **extra: str) -> subprocess.Popen[str]:
    """A process paused at ``breakpoint()``, which finds the hub through the state file."""
    script = write_script(directory, "worker.py", PAUSING_WORKER)
    return subprocess.Popen([sys.executable, str(script)],
                            env={**machine, "PYTHONBREAKPOINT": "raydebug.set_trace", **extra},
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


@pytest.mark.parametrize("how", [signal.SIGTERM, signal.SIGKILL], ids=["term", "kill"])
def test_a_hub_started_again_on_its_address_gets_its_paused_process_back(
        machine: dict[str, str], tmp_path: Path, how: signal.Signals) -> None:
    first = start_hub(machine)
    worker = None
    second = None
    try:
        worker = paused_worker(machine, tmp_path)
        [session] = first.wait_sessions(1)
        os.kill(first.proc.pid, how)
        first.proc.wait(timeout=TIMEOUT)
        restarted = time.monotonic()
        second = start_hub(machine, first.worker[1])
        assert second.token == first.token  # kept: the process holds it
        [back] = second.wait_sessions(1, timeout=BACK_WITHIN)
        assert time.monotonic() - restarted < BACK_WITHIN
        assert (back["id"], back["pid"]) == (session["id"], worker.pid)
        assert second.evaluate_and_detach(back["id"], "value") == "41"
        code, out, err = finish(worker)
        assert code == 0 and "finished 42" in out, err
        assert "wrong token" not in err and "token changed" not in err, err
    finally:
        for proc in (worker, first.proc, second.proc if second else None):
            if proc is not None:
                stop(proc)


def test_a_hub_started_with_another_token_is_said_to_have_changed_it_once(
        machine: dict[str, str], tmp_path: Path) -> None:
    first = start_hub(machine)
    worker = None
    second = None
    try:
        worker = paused_worker(machine, tmp_path)
        first.wait_sessions(1)
        first.proc.kill()
        first.proc.wait(timeout=TIMEOUT)
        second = start_hub(machine, first.worker[1], "--token", "another-token")
        said, _ = wait_for_line(worker, "refused us")
        assert "refused us: the hub's token changed since this process linked" in said, said
        assert "RAYDEBUG_HUB_CERT" not in said and "set RAYDEBUG_TOKEN" not in said
        # It retries (1, 2, then 5 s apart), and says it once, not at every retry.
        deadline = time.monotonic() + TIMEOUT
        while second.get("/api/health")["refused_agents"] < 2:
            assert time.monotonic() < deadline, "the process did not retry"
            time.sleep(0.2)  # the hub counts refusals; nothing pushes them
        worker.terminate()  # still paused, waiting for a client this hub cannot reach
        _, rest = worker.communicate(timeout=TIMEOUT)
        assert "refused us" not in rest, rest
        log = second.stop_and_read_log()
        assert log.count("refused: wrong token") == 1, log  # ... and the hub said it once
    finally:
        for proc in (worker, first.proc, second.proc if second else None):
            if proc is not None:
                stop(proc)


def test_a_hub_that_cannot_listen_says_only_that(machine: dict[str, str]) -> None:
    """A second hub on the agents' port of a running one (whose token is kept for that
    address) says it cannot listen, in one line: not first that it serves with the kept
    token."""
    first = start_hub(machine)
    try:
        second = subprocess.run([sys.executable, "-m", "raydebug", "hub", "--port", "0",
                                 "--agent-port", str(first.worker[1])], env=machine,
                                capture_output=True, text=True, timeout=TIMEOUT)
        assert second.returncode == 1, second
        assert second.stderr.count("\n") == 1, second.stderr
        assert f"cannot listen on {first.worker[0]}:{first.worker[1]}: the address is in use" \
            in second.stderr, second.stderr
        assert second.stdout == "", second.stdout
    finally:
        stop(first.proc)
