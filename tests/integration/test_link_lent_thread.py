"""The link's bootstrap run on a C thread lent for the call (as ptrace's call runs it on an
event loop's thread of a Ray worker whose main thread is busy): the process is linked, and
the thread leaves no "Dummy-N" entry behind in ``threading`` (before, every linked Ray
worker showed a phantom running thread in each debugger's thread list). Real hub, real
ticket, a real pthread made with ctypes."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from helpers import TIMEOUT, HubProcess
from raydebug.linking.ticket import HubForAgents, Ticket

pytestmark = pytest.mark.integration

LENDS_A_C_THREAD = """
import ctypes, json, sys, threading

libc = ctypes.CDLL(None)
CALLBACK = ctypes.CFUNCTYPE(ctypes.c_void_p, ctypes.c_void_p)

def run_boot(_):  # on the C thread: what PyRun_SimpleString of boot.py runs
    exec(compile(open(sys.argv[1]).read(), sys.argv[1], "exec"), {"__name__": "__boot__"})
    return None

callback = CALLBACK(run_boot)
thread = ctypes.c_ulong()
assert libc.pthread_create(ctypes.byref(thread), None, callback, None) == 0
assert libc.pthread_join(thread, None) == 0
print(json.dumps(sorted(t.name for t in threading.enumerate())), flush=True)
sys.stdin.readline()  # stays linked until the test has looked
"""


def test_a_c_thread_lent_for_the_link_leaves_no_dummy_thread(hub: HubProcess, tmp_path):
    ticket = Ticket(HubForAgents(hub.agent_address, hub.token, hub.cert))
    proc = subprocess.Popen([sys.executable, "-c", LENDS_A_C_THREAD, str(ticket.boot)],
                            env=hub.env(), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None and proc.stdin is not None
        names = json.loads(proc.stdout.readline() or "null")
        assert names is not None, proc.stderr.read() if proc.stderr else ""
        assert json.loads(ticket.result.read_text())["status"] == "linked"
        assert not [name for name in names if name.startswith("Dummy")], names
        assert "MainThread" in names
        hub.wait_processes("the process links",
                           lambda listed: any(p["pid"] == proc.pid for p in listed))
        proc.stdin.write("\n")
        proc.stdin.flush()
        assert proc.wait(timeout=TIMEOUT) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=TIMEOUT)
        ticket.close()
