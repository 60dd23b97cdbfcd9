"""pydevd, started as the agent starts it, sets trace functions without a helper thread per
thread (agent/debugger/thread_tracing.py), and the threads are traced all the same.

In a subprocess, as test_pydevd_internals: starting pydevd installs tracing, which must not
reach this test process.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
TIMEOUT = 60

TRACE_TWO_THREADS = """
import json, os, sys, threading

from raydebug.agent.debugger.start import make_private, start_pydevd

go = threading.Event()
def run():
    go.wait()
    sum(range(10))  # a call: the trace function sees it
worker = threading.Thread(target=run)
worker.start()
py_db = start_pydevd()  # traces every thread, as listen() does
make_private(py_db)

import _thread
import pydevd_tracing
from _pydev_bundle import pydev_monkey

helpers = []
start_new_thread = pydev_monkey.get_original_start_new_thread(_thread)
def counting_start_new_thread(*args):
    helpers.append(args)
    return start_new_thread(*args)
pydev_monkey.get_original_start_new_thread = lambda module: counting_start_new_thread

traced = set()
def trace(frame, event, arg):
    traced.add(threading.get_ident())
    return None
pydevd_tracing.set_trace_to_threads(trace)  # every thread, as pydevd's start does
pydevd_tracing.SetTrace(trace)  # this thread, as each thread's first traced call does
go.set()
worker.join()
sum(range(10))
pydevd_tracing.SetTrace(None)
sys.stdout.write(json.dumps({"helper_threads": len(helpers),
                             "worker_traced": worker.ident in traced,
                             "main_traced": threading.get_ident() in traced}))
sys.stdout.flush()
os._exit(0)  # pydevd's exit handlers wait for a client that will not come
"""


@pytest.mark.skipif(sys.version_info >= (3, 12), reason="3.12+: pydevd uses sys.monitoring")
def test_pydevd_traces_threads_without_a_helper_thread_each() -> None:
    done = subprocess.run([sys.executable, "-c", TRACE_TWO_THREADS], capture_output=True,
                          text=True, timeout=TIMEOUT,
                          env={**os.environ, "PYTHONPATH": str(ROOT / "src")})
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {"helper_threads": 0, "worker_traced": True,
                                       "main_traced": True}
