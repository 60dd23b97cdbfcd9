"""`raydebug attach` when the hub's connection drops under it (a killed hub, one Ray
restarts): the process is still paused, under the same id. The terminal says so, and
reconnects (`--follow`) or says how to. A real pseudo-terminal, real hubs on the same ports,
a real paused process."""

from __future__ import annotations

import os
import re
import signal
import socket
import sys
from collections.abc import Iterator
from pathlib import Path

import pexpect
import pytest

from devtools.terminal import LEAVE_PROMPT, PROMPT, Attach, end_spawned
from helpers import TIMEOUT, HubProcess, finish, start_hub, write_script

pytestmark = pytest.mark.integration

SESSION_OVER = ["compute() returned", "has ended"]  # as the process exits right after

JOB = """
def compute(value):
    doubled = value * 2
    breakpoint()
    return doubled + 1  # its stop

print("result", compute(20), flush=True)
"""


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


class Hubs:
    """One hub at a time on the same two ports with the same token, as Ray restarts its
    hub actor: the paused process links to the next one."""

    def __init__(self) -> None:
        self.ports = ("--port", str(free_port()), "--agent-port", str(free_port()))
        self.hub = start_hub(*self.ports)

    def kill(self) -> None:
        self.hub.proc.send_signal(signal.SIGKILL)  # no goodbye to anyone
        self.hub.proc.wait(timeout=TIMEOUT)

    def restart(self) -> HubProcess:
        workers = self.hub.workers
        self.hub = start_hub(*self.ports)
        self.hub.workers = workers  # stopped with it
        return self.hub


@pytest.fixture
def hubs() -> Iterator[Hubs]:
    made = Hubs()
    yield made
    made.hub.close()


@pytest.fixture
def terms() -> Iterator[list[Attach]]:
    started: list[Attach] = []
    yield started
    for term in started:
        term.close()


def paused_and_attached(hubs: Hubs, terms: list[Attach], tmp_path: Path,
                        *args: str) -> tuple[dict, Attach]:
    script = write_script(tmp_path, "job.py", JOB)
    hubs.hub.spawn(script)
    [session] = hubs.hub.wait_sessions(1)
    term = Attach(hubs.hub, *args)
    terms.append(term)
    term.expect(PROMPT)
    assert term.do("p doubled").strip() == "40"
    return session, term


def test_follow_reconnects_to_the_restarted_hub_and_the_same_session(
        hubs: Hubs, terms: list[Attach], tmp_path: Path):
    session, term = paused_and_attached(hubs, terms, tmp_path, "--follow")
    hubs.kill()
    term.expect(f"session {session['id']}: lost the connection to the hub at "
                f"{hubs.hub.client_address} (it stopped or restarted); the process may "
                "still be paused (Enter reconnects)")
    assert "session is over" not in str(term.child.before)
    hub = hubs.restart()
    term.child.sendline("")
    term.expect(f"reconnecting to the hub at {hub.client_address}")
    term.expect(f"the hub is back: session {session['id']} again")
    term.expect(PROMPT)
    assert term.do("p doubled").strip() == "40"  # the same frame, still paused
    term.child.sendline("c")
    term.child.expect_exact(SESSION_OVER)
    code, out, _ = finish(hub.workers[0])
    assert code == 0 and "result 41" in out


def test_without_follow_it_says_the_command_that_takes_you_back(
        hubs: Hubs, terms: list[Attach], tmp_path: Path):
    session, term = paused_and_attached(hubs, terms, tmp_path)
    hubs.kill()
    term.expect("the process may still be paused (Enter leaves)")
    term.child.sendline("")
    term.child.expect(r"attach to it again once the hub is back: ([^\r\n]+)\r\n")
    command = str(term.child.match.group(1))
    assert re.fullmatch(rf"\S*raydebug attach --hub {hubs.hub.client_address} "
                        rf"{session['id']}", command), command
    term.child.expect(pexpect.EOF)
    term.child.close()
    assert term.child.exitstatus == 1
    hub = hubs.restart()
    hub.wait_sessions(1)  # linked again, with its session
    back = pexpect.spawn("bash", ["-c", command], env={**os.environ, "NO_COLOR": "1"},
                         encoding="utf-8", timeout=TIMEOUT, dimensions=(24, 80))
    if os.environ.get("RAYDEBUG_TEST_TRANSCRIPT"):
        back.logfile_read = sys.stdout
    try:
        back.expect_exact(PROMPT)
        back.sendline("p doubled")
        back.expect_exact("40")
        back.sendline("c")
        back.expect_exact(SESSION_OVER)
        back.expect_exact(LEAVE_PROMPT)
        back.sendline("")
        back.expect(pexpect.EOF)
    finally:
        end_spawned(back)
    code, out, _ = finish(hub.workers[0])
    assert code == 0 and "result 41" in out


def test_follow_waiting_for_a_breakpoint_waits_on_the_restarted_hub(
        hubs: Hubs, terms: list[Attach], tmp_path: Path):
    """Between sessions a restarted hub ended `--follow` ("has gone away")."""
    _, term = paused_and_attached(hubs, terms, tmp_path, "--follow")
    term.child.sendline("c")
    term.child.expect_exact(SESSION_OVER)
    term.expect("waiting for a breakpoint...")
    hubs.kill()
    term.expect(f"lost the connection to the hub at {hubs.hub.client_address} (it stopped or "
                "restarted)")
    term.expect("reconnecting to the hub")
    hub = hubs.restart()
    term.expect("waiting for a breakpoint...")
    hub.spawn(write_script(tmp_path, "next.py", JOB))
    header = term.expect(PROMPT)
    [following] = hub.wait_sessions(1)
    assert f"session {following['id']}" in header and "has gone away" not in header
    assert term.do("p doubled").strip() == "40"
