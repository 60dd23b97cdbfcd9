"""Every pause says so in the process's log (which a Ray driver prints), as breakpoint()
does: a post-mortem names its exception, a `raydebug pause` is said too. Real processes, a
real hub, the real CLI."""

from __future__ import annotations

import selectors
import subprocess
import sys
import time

import pytest

from helpers import TIMEOUT, HubProcess, line_of, write_script

pytestmark = pytest.mark.integration

FAILING = """
def seed(rows):
    return rows / 0  # raised here

seed(21)
"""


def stderr_line_with(proc: subprocess.Popen[str], text: str, timeout: float = TIMEOUT) -> str:
    """The first line of ``proc``'s stderr that contains ``text``, waiting at most
    ``timeout`` seconds for it."""
    assert proc.stderr is not None
    deadline = time.monotonic() + timeout
    seen = []
    with selectors.DefaultSelector() as selector:
        selector.register(proc.stderr, selectors.EVENT_READ)
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0 or not selector.select(remaining):
                raise TimeoutError(f"no {text!r} on pid {proc.pid}'s stderr: {seen}")
            line = proc.stderr.readline()
            if not line:
                raise EOFError(f"pid {proc.pid} ended without {text!r}: {seen}")
            if text in line:
                return line.rstrip("\n")
            seen.append(line)


def test_a_post_mortem_notice_names_the_exception(hub: HubProcess, tmp_path):
    script = write_script(tmp_path, "seed_job.py", FAILING)
    proc = hub.spawn(script, RAYDEBUG_POST_MORTEM="1", PYTHONBREAKPOINT="0")
    notice = stderr_line_with(proc, "paused at")
    assert f"paused at {script}:{line_of(script, 'raised here')} on ZeroDivisionError: " \
           "division by zero, waiting for a debugger" in notice, notice


SPIN = """
def spin():
    laps = 0
    while True:
        laps += 1  # spinning

spin()
"""


def test_a_raydebug_pause_says_so_as_a_breakpoint_does(hub: HubProcess, tmp_path):
    script = write_script(tmp_path, "spin.py", SPIN)
    proc = hub.spawn(script, RAYDEBUG_LIVE="1")
    hub.wait_processes("the spinner linked", lambda ps: any(p["pid"] == proc.pid for p in ps))
    subprocess.run([sys.executable, "-m", "raydebug", "pause", f"pid={proc.pid}",
                    "--hub", hub.client_address], check=True, capture_output=True,
                   timeout=TIMEOUT)
    notice = stderr_line_with(proc, "paused at")
    assert f"paused at {script}:{line_of(script, 'spinning')} by raydebug pause, waiting for " \
           f"a debugger (hub: {hub.agent_address})" in notice, notice
