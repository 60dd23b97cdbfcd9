"""A main thread blocked in a call raydebug's signal does not interrupt is served where it
waits, as any other blocked thread: ``raydebug pause`` lists a session for it, blocked in C,
its locals read; ``evaluate`` of what unblocks the call works, the thread then stops at its
next line; continue, and the program completes.

Two such calls: a C function (compiled here) that waits on a condition variable, which
``EINTR`` never ends (``pthread_cond_wait`` waits again), called through ctypes with the GIL
released, as a C extension's collective waits; and ``Event.wait()`` in a program that ignores
raydebug's signal (it took it for itself). Real processes, a real hub, the real DapClient."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from devtools.pythons import python_for
from helpers import (
    TIMEOUT,
    HubProcess,
    finish,
    line_of,
    locals_of,
    read_line,
    run,
    top_frame,
    write_script,
)

pytestmark = pytest.mark.integration

SOURCE = Path(__file__).resolve().parents[2] / "src"

GATE_C = r"""
#include <pthread.h>

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t changed = PTHREAD_COND_INITIALIZER;
static int opened = 0;

/* Returns once gate_open() was called; a signal does not end the wait. */
void gate_wait(void) {
    pthread_mutex_lock(&lock);
    while (!opened)
        pthread_cond_wait(&changed, &lock);
    pthread_mutex_unlock(&lock);
}

void gate_open(void) {
    pthread_mutex_lock(&lock);
    opened = 1;
    pthread_cond_broadcast(&changed);
    pthread_mutex_unlock(&lock);
}
"""

IN_C_EXTENSION = """
import ctypes, os
from raydebug.agent import start_live_link

start_live_link()  # as RAYDEBUG_LIVE=1 does where raydebug's .pth is installed (not 3.12's)
gate = ctypes.CDLL(os.environ["GATE_LIBRARY"])  # CDLL: the GIL is released during a call
"""

SIGNAL_IGNORED = """
import os, signal, threading
from raydebug.agent import pause_signal, start_live_link

start_live_link()
# As a program that takes every signal for itself: raydebug's cannot interrupt the main thread.
signal.signal(pause_signal.installed(), signal.SIG_IGN)
gate = threading.Event()
"""

MAIN = """
def main():
    waiting_for = "the gate"
    print("started", os.getpid(), flush=True)
    {call}  # blocked in C
    after = waiting_for + " opened"
    print("main:", after, flush=True)

main()
print("finished", flush=True)
"""


def gate_library(tmp_path: Path) -> Path:
    compiler = shutil.which("gcc") or shutil.which("cc")
    if compiler is None:
        pytest.skip("no C compiler here")
    source = tmp_path / "gate.c"
    source.write_text(GATE_C)
    library = tmp_path / "libgate.so"
    subprocess.run([compiler, "-shared", "-fPIC", "-pthread", "-o", str(library), str(source)],
                   check=True, timeout=TIMEOUT)
    return library


CASES = {
    "c-extension": (IN_C_EXTENSION, "gate.gate_wait()", "gate.gate_open()"),
    "signal-ignored": (SIGNAL_IGNORED, "gate.wait()", "gate.set()"),
}


@pytest.mark.parametrize("version", ["3.11", "3.12"])
@pytest.mark.parametrize("case", sorted(CASES))
def test_a_main_thread_the_signal_cannot_interrupt_is_served_where_it_waits(
        hub: HubProcess, tmp_path: Path, case: str, version: str):
    setup, blocking_call, unblock = CASES[case]
    script = write_script(tmp_path, f"{case}.py", setup + MAIN.format(call=blocking_call))
    waits, after = line_of(script, blocking_call), line_of(script, "after = ")
    proc = hub.spawn_linked(script, python_for(version), PYTHONPATH=str(SOURCE),
                            GATE_LIBRARY=str(gate_library(tmp_path)))
    assert read_line(proc).split() == ["started", str(proc.pid)]

    asked = time.monotonic()
    paused = subprocess.run([sys.executable, "-m", "raydebug", "pause", f"pid={proc.pid}",
                             "--hub", hub.client_address], capture_output=True, text=True,
                            timeout=TIMEOUT, env={**os.environ, "NO_COLOR": "1"})
    assert paused.returncode == 0, paused.stderr
    (session,) = hub.wait_sessions(1)
    print(f"{case}: listed blocked in C {time.monotonic() - asked:.2f} s after raydebug pause "
          "started")
    assert session["thread"] == "MainThread" and session["blocked_in_c"] is True, session
    assert (session["function"], session["line"]) == ("main", waits), session
    assert session["id"] in paused.stdout, paused.stdout  # the pause lists it

    async def scenario() -> None:
        client = await hub.dap()
        stopped = await client.attach(session["id"])
        main = stopped.body["threadId"]
        top = await top_frame(client, main)
        assert (top["name"], top["line"]) == ("main", waits), top
        assert (await locals_of(client, top["id"]))["waiting_for"] == "'the gate'"
        await client.request("evaluate", {  # on raydebug's thread, in the blocked frame
            "expression": unblock, "frameId": top["id"], "context": "repl"})
        await client.wait_event("stopped", threadId=main)  # back from C, at its next line
        top = await top_frame(client, main)
        assert (top["name"], top["line"]) == ("main", after), top
        await client.request("continue", {"threadId": main})
        await client.request("disconnect", {})
        await client.close()

    run(scenario(), TIMEOUT)
    code, out, err = finish(proc)
    assert code == 0, err[-2000:]
    assert "main: the gate opened" in out and "finished" in out, out
    assert f"session {session['id']}: its call returned; paused at " in err, err
