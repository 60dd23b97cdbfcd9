"""A request posted to one suspended thread (an evaluate, a variables) wakes no other
suspended thread; a thread pydevd resumed or set stepping is woken (the stepping-bug
workaround of agent/debugger/suspensions.py, docs/design.md#stepping-bug).

In a subprocess: the pydevd constants the workaround reads need debugpy's vendored pydevd
imported, which replaces ``sys.breakpointhook``; that must not reach this test process. pydevd
itself is not started: its two methods the workaround wraps are stand-ins here.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TIMEOUT = 60

WAKES = """
import collections, json, os, sys, threading, types

import debugpy.server  # puts the vendored pydevd on sys.path
from _pydevd_bundle.pydevd_comm_constants import CMD_STEP_INTO, CMD_STEP_OVER, CMD_THREAD_SUSPEND
from _pydevd_bundle.pydevd_constants import STATE_RUN, STATE_SUSPEND, get_current_thread_id

from raydebug.agent.debugger.suspensions import Suspensions

events = collections.defaultdict(threading.Event)  # pydevd's per-thread events, by thread id
suspended = threading.Barrier(3)
resume = threading.Event()

def wait_suspended(thread, *args, **kwargs):  # pydevd's do_wait_suspend: waits to be resumed
    suspended.wait(10)
    resume.wait(10)

py_db = types.SimpleNamespace(
    get_internal_queue_and_event=lambda thread_id: (None, events[thread_id]),
    do_wait_suspend=wait_suspended)
Suspensions().watch(py_db, lambda ident, frame: None, lambda ident: None)

def suspend(step_cmd):  # as pydevd's mark_thread_suspended leaves a thread
    thread = threading.current_thread()
    thread.additional_info = types.SimpleNamespace(pydev_state=STATE_SUSPEND,
                                                   pydev_step_cmd=step_cmd)
    py_db.do_wait_suspend(thread, None)

stopped = threading.Thread(target=suspend, args=(CMD_STEP_INTO,))  # the one that stopped
other = threading.Thread(target=suspend, args=(CMD_THREAD_SUSPEND,))  # suspended with it
stopped.start(); other.start()
suspended.wait(10)
stopped_id, other_id = get_current_thread_id(stopped), get_current_thread_id(other)

_, event = py_db.get_internal_queue_and_event(stopped_id)
event.set()  # an evaluate posted to the stopped thread
result = {"posted_to_it": events[stopped_id].is_set(), "other_woken": events[other_id].is_set()}

events[other_id].clear()
other.additional_info.pydev_step_cmd = CMD_STEP_OVER  # `next` on the other thread
other.additional_info.pydev_state = STATE_RUN
event.set()
result["stepping_woken"] = events[other_id].is_set()
resume.set()
stopped.join(10); other.join(10)
sys.stdout.write(json.dumps(result))
"""


def test_a_request_to_one_suspended_thread_wakes_only_moved_threads() -> None:
    done = subprocess.run([sys.executable, "-c", WAKES], capture_output=True, text=True,
                          timeout=TIMEOUT, env={**os.environ, "PYTHONPATH": str(ROOT / "src")})
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {"posted_to_it": True, "other_woken": False,
                                       "stepping_woken": True}
