"""A live link's start: it waits for its process to start, and a fork waits for its imports.

The link thread's own work (the agent's imports, the hub's lookup, the handshake) must not be
taken from the process's start (``live.wait_for_the_start``), and a fork must not split an
import the link thread has in flight (``fork_guard``). The fork tests run in a fresh
interpreter: pytest's own threads must not be forked.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
import threading
import time

from raydebug.agent import fork_guard
from raydebug.agent.link import live


def wait_in_thread(**kwargs: float) -> threading.Thread:
    thread = threading.Thread(target=live.wait_for_the_start, kwargs=kwargs, daemon=True)
    thread.start()
    return thread


def test_the_link_starts_once_the_main_thread_has_little_to_do():
    began = time.monotonic()
    thread = wait_in_thread(span=0.02, longest=5.0)
    thread.join(10)  # this (main) thread waits: it uses no CPU
    assert not thread.is_alive()
    assert time.monotonic() - began < 2.5  # one span, or a few on a loaded machine


def test_the_link_waits_while_the_main_thread_computes_but_not_for_ever():
    began = time.monotonic()
    thread = wait_in_thread(span=0.02, longest=0.5)
    deadline = began + 10
    while thread.is_alive() and time.monotonic() < deadline:
        sum(range(10_000))  # the main thread busy: the process is still starting
    assert not thread.is_alive()
    assert 0.5 <= time.monotonic() - began < 5


def import_in_thread(leave: threading.Event) -> tuple[threading.Thread, threading.Event]:
    """A thread inside ``fork_guard.importing()`` until ``leave``; and the event it sets
    once inside."""
    entered = threading.Event()

    def importing() -> None:
        with fork_guard.importing():
            entered.set()
            leave.wait(10)

    thread = threading.Thread(target=importing, daemon=True)
    thread.start()
    return thread, entered


def test_a_fork_waits_for_an_import_in_flight_and_holds_new_ones_back():
    leave = threading.Event()
    first, entered = import_in_thread(leave)
    assert entered.wait(10)
    threading.Timer(0.2, leave.set).start()
    late_leaves = threading.Event()
    fork_guard.hold_for_fork(timeout=10)
    try:
        first.join(1)
        assert not first.is_alive()  # the fork waited for the import to end
        late, late_entered = import_in_thread(late_leaves)
        assert not late_entered.wait(0.2)  # a new one waits while the fork goes on
    finally:
        fork_guard.release_after_fork(in_child=False)
    assert late_entered.wait(10)
    late_leaves.set()
    late.join(10)


def test_a_fork_goes_on_after_its_bound_and_ignores_its_own_thread_import():
    with fork_guard.importing():  # the forking thread's own import: no wait
        began = time.monotonic()
        fork_guard.hold_for_fork(timeout=5)
        fork_guard.release_after_fork(in_child=False)
        assert time.monotonic() - began < 1
    leave = threading.Event()
    stuck, entered = import_in_thread(leave)
    assert entered.wait(10)
    began = time.monotonic()
    fork_guard.hold_for_fork(timeout=0.2)  # an import that does not end: the fork goes on
    fork_guard.release_after_fork(in_child=False)
    assert 0.2 <= time.monotonic() - began < 5
    leave.set()
    stuck.join(10)


# A module whose import takes 0.5 s, imported by a thread as the link thread does, while the
# main thread forks; the child imports it too. Without the guard the child gets a module lock
# held by a thread it does not have, or a half-made module.
FORK_DURING_IMPORT = """
import os, sys, threading, time
sys.path.insert(0, sys.argv[1])
from raydebug.agent import fork_guard
started = threading.Event()
def link_thread():
    with fork_guard.importing():
        started.set()
        import slow_module
threading.Thread(target=link_thread).start()
started.wait(10)
time.sleep(0.1)  # the import is in flight
pid = os.fork()
if pid == 0:
    import slow_module
    os._exit(0 if slow_module.WHOLE else 3)
deadline = time.monotonic() + 20
while time.monotonic() < deadline:
    done, status = os.waitpid(pid, os.WNOHANG)
    if done:
        print("child", os.waitstatus_to_exitcode(status))
        break
    time.sleep(0.02)
else:
    os.kill(pid, 9)
    print("child hung")
"""


def test_a_fork_child_gets_whole_modules_from_an_import_the_link_had_in_flight(tmp_path):
    (tmp_path / "slow_module.py").write_text("import time\ntime.sleep(0.5)\nWHOLE = True\n")
    done = subprocess.run([sys.executable, "-c", textwrap.dedent(FORK_DURING_IMPORT),
                           str(tmp_path)], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "child 0"
