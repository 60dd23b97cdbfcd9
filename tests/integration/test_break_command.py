"""``raydebug break`` from the terminal, against a real hub and live processes: a
conditional breakpoint stops the matching rank as a session (a client reads its locals);
``--list`` shows it verified; ``--clear`` disarms every process (no trace function, no
monitoring tool left); bad input is one clear line."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pexpect

from devtools.terminal import PROMPT, Attach
from helpers import TIMEOUT, HubProcess, line_of, read_line, write_script

JOB = """
import os, sys

def step(i):
    return i * 2  # breakpoint line

for _ in range(2):  # breakpoints, then a logpoint on the same line
    input()  # the test says when it is linked and armed
    for i in range(5):
        step(i)
    print("ran", flush=True)
input()  # the test says when the breakpoints are cleared
import time
from raydebug.agent import get_agent
armed = get_agent().breakpoints
for _ in range(500):  # the hub's ArmBreakpoints may still be on its way to the link thread
    if not armed.active():
        break
    time.sleep(0.01)
print("armed", armed.active(), sys.gettrace(), flush=True)
"""


def raydebug(hub: HubProcess, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "raydebug", "break", "--hub",
                           hub.client_address, *args], capture_output=True, text=True,
                          timeout=TIMEOUT)


def test_break_list_clear(hub: HubProcess, tmp_path: Path):
    script = write_script(tmp_path, "job.py", JOB)
    line = line_of(script, "breakpoint line")
    bad = raydebug(hub, "job.py")
    assert bad.returncode == 1 and "is not FILE:LINE" in bad.stderr
    assert bad.stderr.count("\n") == 1, bad.stderr
    elsewhere = f"{tmp_path / 'nofile.py'}:3"  # a file only the processes may have: set, said
    noted = raydebug(hub, elsewhere)
    assert noted.returncode == 0, noted.stderr
    assert noted.stderr.startswith(f"note: no {tmp_path / 'nofile.py'} on this machine"), noted
    assert noted.stdout.startswith(f"{elsewhere}  [not loaded yet]"), noted
    assert raydebug(hub, "--remove", elsewhere).returncode == 0
    made = raydebug(hub, f"{script}:{line}", "if", "RANK", "==", '"2"', "and", "i", "==", "3")
    assert made.returncode == 0 and made.stderr == "", made.stderr
    assert made.stdout.strip() == (f'{script}:{line} if RANK == "2" and i == 3  '
                                   "[not loaded yet] (terminal)")
    procs = [subprocess.Popen([sys.executable, str(script)],
                              env=hub.env(RAYDEBUG_LIVE="1", RANK=str(rank)),
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for rank in (1, 2)]
    hub.workers.extend(procs)
    hub.wait_processes("the processes link",
                       lambda ps: len([p for p in ps if p.get("live")]) >= 2)
    for proc in procs:
        assert proc.stdin is not None
        proc.stdin.write("\n")
        proc.stdin.flush()
    [session] = hub.wait_sessions(1, timeout=60)
    assert (session["pid"], session["line"], session["reason"]) == (
        procs[1].pid, line, "breakpoint")
    assert hub.evaluate_and_detach(session["id"], "i") == "3"
    for proc in procs:
        assert read_line(proc).strip() == "ran"
    logged = raydebug(hub, f"{script}:{line}", "--log", "step {i} on {RANK}")
    assert "log 'step {i} on {RANK}'" in logged.stdout, logged
    # One breakpoint a line, as in an IDE: the conditional one made way, and it is said.
    assert logged.stdout.splitlines()[-1] == (
        f'(replaced {script}:{line} if RANK == "2" and i == 3  [verified] (terminal))'), logged
    for proc in procs:
        assert proc.stdin is not None
        proc.stdin.write("\n")  # the loop again: logging, not pausing
        proc.stdin.flush()
    follow = subprocess.run([sys.executable, "-m", "raydebug", "logs", "--hub",
                             hub.client_address, "--follow", "--timeout", "3"],
                            capture_output=True, text=True, timeout=TIMEOUT)
    got = sorted(text.split("] ", 1)[1] for text in follow.stdout.splitlines())
    assert got == sorted(f"step {i} on {rank}" for i in range(5) for rank in (1, 2)), follow
    for proc in procs:
        assert read_line(proc).strip() == "ran"
    listed = raydebug(hub, "--list")
    assert "[verified] (terminal)" in listed.stdout, listed
    cleared = raydebug(hub, "--clear")
    assert cleared.stdout.splitlines() == [  # what went: "no cluster breakpoints" read as none
        "cleared 1 breakpoint set from the terminal:",
        f"  {script}:{line} log 'step {{i}} on {{RANK}}'  [verified] (terminal)"], cleared
    again = raydebug(hub, "--clear")
    assert again.stdout.strip() == "cleared 0 breakpoints set from the terminal", again
    for proc in procs:
        out, err = proc.communicate("\n", timeout=TIMEOUT)
        assert out.split() == ["armed", "False", "None"], err[-2000:]


def wait_verified(hub: HubProcess) -> None:
    """Until a linked process has reported the breakpoints' file loaded: it reports that once
    the set is armed in it, so a line it runs from then on is seen."""
    hub.wait_listing("/api/breakpoints", "a process arms the breakpoints",
                     lambda listed: all(b["verified"] for b in listed["breakpoints"]))


LOOP = """
def step(i):
    return i * 2  # breakpoint line

input()  # the test says when it is linked and armed
for i in range(6):
    step(i)
print("done", flush=True)
"""


def test_attach_follow_takes_each_hit_of_a_terminal_breakpoint_in_turn(hub: HubProcess,
                                                                        tmp_path: Path):
    script = write_script(tmp_path, "loop.py", LOOP)
    line = line_of(script, "breakpoint line")
    assert raydebug(hub, f"{script}:{line}", "if", "i % 2 == 1").returncode == 0
    worker = subprocess.Popen([sys.executable, str(script)], env=hub.env(RAYDEBUG_LIVE="1"),
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True)
    hub.workers.append(worker)
    term = Attach(hub, "--follow")
    try:
        wait_verified(hub)
        assert worker.stdin is not None
        worker.stdin.write("\n")
        worker.stdin.flush()
        header = term.expect(PROMPT)
        assert f"cluster breakpoint at {script}:{line}" in header, header
        assert "breakpoint()" not in header  # there is none in the code
        assert term.do("p i").strip() == "1"
        # pdb's `c`: on to the next hit, in this session (pydevd stops there while we debug
        # the process; the agent stood down: its hits at 3 and 5 were lost before).
        for i in (3, 5):
            stop = term.do("c")
            assert f"({line})step()" in stop, stop
            assert term.do("p i").strip() == str(i)
        term.child.sendline("c")
        assert read_line(worker).strip() == "done"
        term.expect("waiting for a breakpoint...")
        term.child.sendintr()
        term.child.expect_exact(pexpect.EOF)
    finally:
        term.close()
        raydebug(hub, "--clear")


def test_a_quoted_condition_and_removing_one_breakpoint(hub: HubProcess, tmp_path: Path):
    """``raydebug break 'FILE:LINE if CONDITION'`` as one shell word (a condition with ``>``
    and ``(``), and ``--remove FILE:LINE`` takes out that one, through the hub."""
    script = write_script(tmp_path, "loop.py", LOOP)
    line = line_of(script, "breakpoint line")
    quoted = raydebug(hub, f"{script}:{line} if len(str(i)) > 0 and i > 2")
    assert quoted.returncode == 0, quoted.stderr
    assert raydebug(hub, f"{script}:{line + 3}").returncode == 0
    removed = raydebug(hub, "--remove", f"{script}:{line + 3}")
    assert (removed.returncode, removed.stdout.strip()) == (
        0, f"removed {script}:{line + 3}  [not loaded yet] (terminal)"), removed
    listed = raydebug(hub, "--list")
    assert listed.stdout.strip() == (f"{script}:{line} if len(str(i)) > 0 and i > 2  "
                                     "[not loaded yet] (terminal)"), listed
    again = raydebug(hub, "--remove", f"{script}:{line + 3}")
    assert again.returncode == 1 and again.stderr.count("\n") == 1, again
    assert f"no cluster breakpoint at {script}:{line + 3}" in again.stderr
    raydebug(hub, "--clear")


def test_logs_with_no_logpoint_lines_says_so_on_stderr(hub: HubProcess):
    """Found by use: `raydebug logs` on a hub without logpoint lines printed nothing at all,
    which read as a failure; --follow waited in silence."""
    logs = [sys.executable, "-m", "raydebug", "logs", "--hub", hub.client_address]
    done = subprocess.run(logs, capture_output=True, text=True, timeout=TIMEOUT)
    assert (done.returncode, done.stdout) == (0, ""), done.stderr
    assert done.stderr == (f"raydebug: no logpoint lines on the hub at {hub.client_address} "
                           "(--hub); "
                           "`raydebug break FILE:LINE --log MESSAGE` sets a logpoint\n")
    followed = subprocess.run([*logs, "--follow", "--timeout", "0.5"], capture_output=True,
                              text=True, timeout=TIMEOUT)
    assert (followed.returncode, followed.stdout) == (0, ""), followed.stderr
    assert followed.stderr == (f"raydebug: no logpoint lines on the hub at "
                               f"{hub.client_address} (--hub) yet; waiting for them "
                               "(Ctrl-C stops)\n")


def test_break_in_a_60_column_terminal_keeps_each_breakpoint_on_one_line(hub: HubProcess,
                                                                        tmp_path: Path):
    """Found by use: at 60 columns a logpoint's line (its whole path first) was wrapped by
    the terminal mid-word."""
    script = write_script(tmp_path, "job.py", "total = 0\n")
    shell = pexpect.spawn(sys.executable, ["-m", "raydebug", "break", "--hub",
                                           hub.client_address, f"{script}:1", "--log",
                                           "total={total}"],
                          encoding="utf-8", timeout=TIMEOUT, dimensions=(24, 60))
    shell.expect(pexpect.EOF)
    shell.close()
    lines = shell.before.replace("\r\n", "\n").splitlines()
    assert shell.exitstatus == 0 and lines == [
        "…/job.py:1 log 'total={total}'  [not loaded yet] (terminal)"], lines
