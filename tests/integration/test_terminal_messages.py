"""What `raydebug attach` (and a paused worker) says: true, one line where one will do, at
the terminal's width. A real pseudo-terminal (pexpect), a real hub, real paused processes."""

from __future__ import annotations

import re
import time
from pathlib import Path

import pexpect
import pytest

from devtools.terminal import JOB, LEAVE_PROMPT, PROMPT, Attach, start_attach
from helpers import HubProcess, line_of, write_script

pytestmark = pytest.mark.integration

SLOW = """
breakpoint()
x = 1
"""


def test_header_and_breakpoints_on_lines_without_code(hub: HubProcess, attach: list[Attach],
                                                      tmp_path: Path):
    script = write_script(tmp_path, "job.py", JOB)
    hub.spawn(script, "job-1")
    session = hub.wait_sessions(1)[0]
    term = start_attach(hub, attach, str(session["id"])[:4])  # a unique prefix will do
    header = term.expect(PROMPT)
    called = line_of(script, "breakpoint()")
    assert f"breakpoint() at {script}:{called}, next line {called + 1}" in header
    assert f"({called + 1})compute()" in header  # the arrow's line, said the same
    blank = line_of(script, "def compute") - 1
    assert f"*** Blank or comment: line {blank} of {script}" in term.do(f"b {blank}")
    assert "No breakpoints." in term.do("b")  # nothing was set elsewhere
    assert "*** line 999 is past the end" in term.do("b 999")
    term.do_and_end("q", "the process runs on")


@pytest.mark.parametrize("columns", [120, 60])
def test_help_and_the_follow_rule_fit_the_terminal(hub: HubProcess, attach: list[Attach],
                                                   tmp_path: Path, columns: int):
    script = write_script(tmp_path, "job.py", JOB)
    for number in (1, 2):
        hub.spawn(script, f"job-{number}")
    hub.wait_sessions(2)
    term = start_attach(hub, attach, "--follow", columns=columns)
    term.expect(PROMPT)
    lines = term.do("help").splitlines()
    assert len(lines) > 20 and max(len(line) for line in lines) <= columns
    assert max(len(line) for line in lines) > columns - 12  # it uses the width it has
    term.child.sendline("c")
    term.expect("── breakpoint 2 ")
    assert term.expect("\r\n") == "─" * (columns - 16)  # the rule ends at the edge
    term.expect(PROMPT)
    term.do_and_end("q", "the process runs on")


def test_a_process_ended_by_a_statement_is_noticed_at_once(hub: HubProcess,
                                                           attach: list[Attach],
                                                           tmp_path: Path):
    proc = hub.spawn(write_script(tmp_path, "slow.py", SLOW))
    hub.wait_sessions(1)
    term = start_attach(hub, attach)
    term.expect(PROMPT)
    started = time.monotonic()
    term.child.sendline("!import os; os._exit(1)")
    term.expect(f"process {proc.pid} has ended")
    assert time.monotonic() - started < 2.0  # was 5.1 s: the evaluate's answer never comes
    term.expect(LEAVE_PROMPT)
    term.child.sendline("")
    term.child.expect(pexpect.EOF)


def test_a_slow_evaluation_says_so_in_one_line_and_ctrl_c_stops_waiting(
        hub: HubProcess, attach: list[Attach], tmp_path: Path):
    # pydevd's warning of a slow evaluation after 1 s, not its 3: the test waits for the
    # evaluation to end (5 s after the warning, as before, for Ctrl-C and `p 2` under load).
    hub.spawn(write_script(tmp_path, "slow.py", SLOW), PYDEVD_WARN_EVALUATION_TIMEOUT="1")
    hub.wait_sessions(1)
    term = start_attach(hub, attach)
    term.expect(PROMPT)
    term.child.sendline("p __import__('time').sleep(6) or 5")
    term.expect("(still evaluating after 1.00 s; Ctrl-C stops waiting")
    term.child.sendintr()
    interrupted = term.expect(PROMPT)
    assert "--KeyboardInterrupt--" in interrupted
    assert "This may mean a number of things" not in interrupted  # pydevd's 20 lines
    waited = term.do("p 2")  # pydevd answers after the slow one: said, not silent
    assert "waiting for the debuggee to finish the interrupted evaluate" in waited
    assert waited.strip().endswith("2")
    term.do_and_end("q", "the process runs on")


def test_a_worker_with_the_wrong_token_does_not_say_it_waits(hub: HubProcess, tmp_path: Path):
    err = hub.run_unserved(tmp_path, wait_timeout="2", RAYDEBUG_TOKEN="not-the-token")
    assert "waiting for a debugger" not in err
    assert re.search(r"paused at .*, but no debugger can attach: the hub at .* refused us: "
                     r"wrong token", err), err
