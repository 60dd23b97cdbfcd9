"""``raydebug break`` from the terminal, against a real hub and live processes: a
conditional breakpoint stops the matching rank as a session (a client reads its locals);
``--list`` shows it verified; ``--clear`` disarms every process (no trace function, no
monitoring tool left); bad input is one clear line."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

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
    made = raydebug(hub, f"{script}:{line}", "if", "RANK", "==", '"2"', "and", "i", "==", "3")
    assert made.returncode == 0, made.stderr
    assert made.stdout.strip() == (f'{script}:{line} if RANK == "2" and i == 3  '
                                   "[not loaded yet] (terminal)")
    procs = [subprocess.Popen([sys.executable, str(script)],
                              env=hub.env(RAYDEBUG_LIVE="1", RANK=str(rank)),
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for rank in (1, 2)]
    hub.workers.extend(procs)
    deadline = time.monotonic() + TIMEOUT
    while len([p for p in hub.get("/api/processes?now=0") if p.get("live")]) < 2:
        assert time.monotonic() < deadline, "the processes did not link"
        time.sleep(0.05)  # the hub's process list has no long-poll
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
    assert cleared.stdout.strip() == "no cluster breakpoints", cleared
    for proc in procs:
        out, err = proc.communicate("\n", timeout=TIMEOUT)
        assert out.split() == ["armed", "False", "None"], err[-2000:]
