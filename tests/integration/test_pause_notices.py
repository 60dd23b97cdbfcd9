"""Every pause says so in the process's log (which a Ray driver prints), as breakpoint()
does: a post-mortem names its exception, a `raydebug pause` is said too. Real processes, a
real hub, the real CLI."""

from __future__ import annotations

import selectors
import subprocess
import sys
import time

import pytest

from helpers import TIMEOUT, HubProcess, finish, line_of, run, write_script

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
    session = notice.split()[2]
    assert f"paused at {script}:{line_of(script, 'spinning')} by raydebug pause, waiting for " \
           f"a debugger: raydebug attach {session} (hub agent port {hub.agent_address})" \
           in notice, notice


SPINNER_AND_BREAKPOINT = """
import threading
from raydebug.agent import start_live_link

start_live_link()  # as RAYDEBUG_LIVE=1 does where raydebug's .pth is installed

stop = threading.Event()

def spin():
    laps = 0
    while not stop.is_set():
        laps += 1  # spinning

thread = threading.Thread(target=spin, name="spinner")
thread.start()
breakpoint()  # the client attaches here, continues, then pauses every thread
main_laps = 0
while not stop.is_set():
    main_laps += 1  # the main thread runs
thread.join()
print("finished", flush=True)
"""


def test_a_thread_paused_under_an_attached_client_is_not_said_to_wait(hub: HubProcess,
                                                                      tmp_path):
    """A client's pause (raydebug attach's Ctrl-C) stops the process's other threads: their
    sessions are the attached client's, so the process's stderr (the terminal of a local
    run, where that client's prompt is) gets no 'waiting for a debugger' line for them."""
    script = write_script(tmp_path, "spinner.py", SPINNER_AND_BREAKPOINT)
    proc = hub.spawn_linked(script)
    (first,) = hub.wait_sessions(1)

    async def scenario() -> str:
        client = await hub.dap()
        stopped = await client.attach(first["id"])
        main = stopped.body["threadId"]
        await client.request("continue", {"threadId": main})
        await client.wait_event("continued")
        await client.request("pause", {"threadId": main})  # raydebug attach's Ctrl-C
        await client.wait_event("stopped")
        (spinner,) = hub.wait_listing("/api/sessions", "the spinner's session", lambda listed: [
            s for s in listed if s["thread"] == "spinner"])
        top = (await client.request("stackTrace", {"threadId": main}))["stackFrames"][0]
        await client.request("evaluate", {"expression": "stop.set()", "frameId": top["id"],
                                          "context": "repl"})
        await client.request("disconnect", {})  # every thread runs on, to the end
        await client.close()
        return str(spinner["id"])

    spinner_id = run(scenario(), TIMEOUT * 2)
    code, out, err = finish(proc)
    assert code == 0 and "finished" in out, err[-2000:]
    waiting = [line for line in err.splitlines() if "waiting for a debugger" in line]
    assert not [line for line in waiting if spinner_id in line], err
    assert len(waiting) == 1 and first["id"] in waiting[0], err  # the breakpoint's, unattached
