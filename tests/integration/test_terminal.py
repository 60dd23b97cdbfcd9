"""`raydebug attach` driven as a person would: a real pseudo-terminal (pexpect), a real hub,
real paused processes."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pexpect
import pytest

from helpers import TIMEOUT, HubProcess, finish, line_of, write_script

pytestmark = pytest.mark.integration

PROMPT = "(raydebug) "

JOB = """
import sys

def double(value, factor):
    twice = value * factor
    return twice

def compute(a, b):
    total = a + b
    breakpoint()
    note = "start"  # first stop
    factor = 2  # break here
    scaled = double(total, factor)
    print(f"{sys.argv[1]} result={scaled} total={total}", flush=True)
    return scaled

def main():
    return compute(3, 4)

main()
"""

SPIN = """
state = {"go": True}

def spin():
    laps = 0
    print("spinning", flush=True)
    while state["go"]:
        laps += 1
    return laps

breakpoint()
laps = spin()
print(f"spun {laps > 0}", flush=True)
"""

FAILING = """
def divide(numerator, denominator):
    share = numerator / denominator  # raises
    return share

divide(84, 0)
"""


class Attach:
    """``raydebug attach`` on an 80x24 pseudo-terminal."""

    def __init__(self, hub: HubProcess, *args: str, colour: bool = False) -> None:
        env = dict(os.environ, TERM="xterm")
        if not colour:
            env["NO_COLOR"] = "1"
        self.child = pexpect.spawn(
            sys.executable, ["-m", "raydebug", "attach", "--hub", hub.client_address, *args],
            env=env, encoding="utf-8", timeout=TIMEOUT, dimensions=(24, 80))

    def expect(self, text: str) -> str:
        """Wait for ``text``; return what came before it."""
        self.child.expect_exact(text)
        return str(self.child.before)

    def do(self, command: str) -> str:
        """Type a command; return what it printed before the next prompt."""
        self.child.sendline(command)
        self.expect(command)  # the terminal's echo
        return self.expect(PROMPT)

    def do_and_end(self, command: str, end: str) -> str:
        self.child.sendline(command)
        return self.expect(end)

    def close(self) -> None:
        if self.child.isalive():
            self.child.kill(signal.SIGKILL)
        self.child.close()


@pytest.fixture
def attach(hub: HubProcess) -> Iterator[list[Attach]]:
    started: list[Attach] = []
    yield started
    for session in started:
        session.close()


def start_attach(hub: HubProcess, started: list[Attach], *args: str, **kw: bool) -> Attach:
    session = Attach(hub, *args, **kw)
    started.append(session)
    return session


def test_a_session_debugged_with_pdb_commands(hub: HubProcess, attach: list[Attach],
                                              tmp_path: Path):
    script = write_script(tmp_path, "job.py", JOB)
    worker = hub.spawn(script, "job-1")
    session = hub.wait_sessions(1)[0]
    term = start_attach(hub, attach)

    header = term.expect(PROMPT)
    assert f"session {session['id']}" in header and f"pid {worker.pid}" in header
    first_stop = line_of(script, "first stop")
    assert f"> {script}({first_stop})compute()" in header
    assert f"{first_stop:>4}  ->     note = \"start\"" in header  # the listing marks the line

    where = term.do("where")
    assert where.index("main()") < where.index("> " + str(script) + f"({first_stop})compute()")
    assert "main()" in term.do("up")
    assert "compute()" in term.do("down")
    assert term.do("p total").strip() == "7"
    term.do("!total = 10")
    assert term.do("p total").strip() == "10"
    assert "a = 3" in term.do("args")

    break_line = line_of(script, "break here")
    assert f"Breakpoint 1 at {script}:{break_line}" in term.do(f"b {break_line}")
    assert f"({break_line})compute()" in term.do("c")
    assert "scaled = double(total, factor)" in term.do("n")
    step = term.do("s")
    assert "double()" in step and "twice = value * factor" in step
    assert "compute()" in term.do("r")
    ended = term.do_and_end("c", "has ended")
    assert "job-1 result=20 total=10" in ended  # the assignment took, output shown in place
    term.child.expect(pexpect.EOF)
    code, out, _ = finish(worker)
    assert code == 0 and "job-1 result=20 total=10" in out


def test_follow_visits_three_processes_one_after_another(hub: HubProcess,
                                                         attach: list[Attach],
                                                         tmp_path: Path):
    script = write_script(tmp_path, "job.py", JOB)
    workers = [hub.spawn(script, f"job-{n}") for n in (1, 2)]
    hub.wait_sessions(2)
    term = start_attach(hub, attach, "--follow")
    visited = []
    for number in (1, 2, 3):
        header = term.expect(PROMPT)
        pid = int(re.search(r"pid (\d+)", header).group(1))  # type: ignore[union-attr]
        visited.append(pid)
        if number > 1:
            assert "next breakpoint: session" in header
        assert term.do("p total").strip() == "7"
        term.do_and_end("c", "the process runs on")
        if number == 2:
            assert "waiting for a breakpoint..." in term.expect("Ctrl-C stops waiting")
            workers.append(hub.spawn(script, "job-3"))
    assert sorted(visited) == sorted(w.pid for w in workers)
    term.expect("waiting for a breakpoint...")
    term.child.sendintr()
    term.child.expect(pexpect.EOF)
    for number, worker in enumerate(workers, start=1):
        code, out, _ = finish(worker)
        assert code == 0 and f"job-{number} result=14" in out


def test_post_mortem_shows_the_exception_and_its_frame(hub: HubProcess,
                                                      attach: list[Attach], tmp_path: Path):
    script = write_script(tmp_path, "failing.py", FAILING)
    worker = hub.spawn(script, RAYDEBUG_POST_MORTEM="1")
    hub.wait_sessions(1)
    term = start_attach(hub, attach)
    header = term.expect(PROMPT)
    assert "post-mortem: ZeroDivisionError: division by zero" in header
    assert f"({line_of(script, 'raises')})divide()" in header
    assert term.do("p numerator * 2").strip() == "168"
    exceptions = term.do("exceptions")
    assert "ZeroDivisionError" in exceptions and "division by zero" in exceptions
    assert "*** NameError: name 'nothing_here' is not defined" in term.do("p nothing_here")
    term.do_and_end("c", "the process runs on")
    code, _, err = finish(worker)
    assert code != 0 and "ZeroDivisionError" in err  # the exception went on as uncaught


def test_ctrl_c_pauses_a_running_process(hub: HubProcess, attach: list[Attach],
                                         tmp_path: Path):
    script = write_script(tmp_path, "spin.py", SPIN)
    worker = hub.spawn(script)
    hub.wait_sessions(1)
    term = start_attach(hub, attach)
    term.expect(PROMPT)
    term.child.sendline("n")  # spin() never returns by itself
    term.expect("spinning")  # its output, shown in place
    term.child.sendintr()
    paused = term.expect(PROMPT)
    assert "pausing (Ctrl-C)" in paused and "spin()" in paused
    assert term.do("p state[\"go\"]").strip() == "True"
    term.do('!state["go"] = False')
    term.do_and_end("c", "the process runs on")
    code, out, _ = finish(worker)
    assert code == 0 and "spun True" in out


def test_an_unknown_session_is_an_error_that_lists_the_sessions(hub: HubProcess,
                                                                tmp_path: Path):
    script = write_script(tmp_path, "job.py", JOB)
    worker = hub.spawn(script, "job-1")
    session = hub.wait_sessions(1)[0]
    result = subprocess.run(
        [sys.executable, "-m", "raydebug", "attach", "no-such-id", "--hub",
         hub.client_address], capture_output=True, text=True, timeout=TIMEOUT,
        stdin=subprocess.DEVNULL)
    assert result.returncode == 1
    assert "no session 'no-such-id'" in result.stderr
    assert f"{session['id']} (waiting, pid {worker.pid})" in result.stderr


def test_piped_commands_read_like_a_transcript(hub: HubProcess, tmp_path: Path):
    script = write_script(tmp_path, "job.py", JOB)
    worker = hub.spawn(script, "job-1")
    hub.wait_sessions(1)
    result = subprocess.run(
        [sys.executable, "-m", "raydebug", "attach", "--hub", hub.client_address],
        input="where\np total\nbogus(\nc\n", capture_output=True, text=True,
        timeout=TIMEOUT)
    assert result.returncode == 0, result.stderr
    assert f"{PROMPT}p total\n7\n" in result.stdout
    assert "*** SyntaxError" in result.stdout  # pdb's way, never a raydebug traceback
    assert "Traceback" not in result.stdout + result.stderr
    assert "\x1b[" not in result.stdout  # no colour when stdout is no terminal
    code, out, _ = finish(worker)
    assert code == 0 and "result=14" in out
