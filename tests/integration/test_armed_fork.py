"""A fork child of an armed process: the parent's arm does not pause through the parent's
agent (the child's link is its own); the child arms the cluster's set when it links and
stops there as a session of its own pid."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from helpers import TIMEOUT, HubProcess, line_of, write_script

JOB = """
import multiprocessing, os, sys

def step(i):
    return i * 2  # breakpoint line

def child():
    import time
    time.sleep(1.0)  # its own link connects and is armed (ms), then the line
    step(1)
    print("child ran", flush=True)

input()  # the test says when the parent is linked and armed
forked = multiprocessing.get_context("fork").Process(target=child)
forked.start()
forked.join(60)
print("parent done", forked.exitcode, flush=True)
"""


def test_a_fork_child_stops_as_its_own_process(hub: HubProcess, tmp_path: Path):
    script = write_script(tmp_path, "job.py", JOB)
    line = line_of(script, "breakpoint line")
    made = subprocess.run([sys.executable, "-m", "raydebug", "break", "--hub",
                           hub.client_address, f"{script}:{line}", "if", "i", "==", "1"],
                          capture_output=True, text=True, timeout=TIMEOUT)
    assert made.returncode == 0, made.stderr
    proc = subprocess.Popen([sys.executable, str(script)], env=hub.env(RAYDEBUG_LIVE="1"),
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    hub.workers.append(proc)
    hub.wait_processes("the process links", lambda ps: [p for p in ps if p.get("live")])
    assert proc.stdin is not None
    proc.stdin.write("\n")
    proc.stdin.flush()
    [session] = hub.wait_sessions(1, timeout=60)
    assert session["pid"] != proc.pid and session["line"] == line, session
    assert hub.evaluate_and_detach(session["id"], "i") == "1"
    out, err = proc.communicate(timeout=TIMEOUT)
    assert "child ran" in out and "parent done 0" in out, err[-2000:]
