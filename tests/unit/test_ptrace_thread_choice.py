"""Which thread of a target `raydebug link` calls into: never one waiting for the GIL (the
call would take the GIL inside that thread's own unfinished wait on the GIL's condition
variable, and the process hang at its next release of the GIL), and how long the helper
looks again while the only threads it could use wait for a GIL held in C."""

from __future__ import annotations

import subprocess
import sys
import time

import pytest

from raydebug.linking.ptrace_call import (
    BUSY_MIN,
    FUTEX,
    PATIENCE,
    QUIET,
    Functions,
    GilSearch,
    Threads,
    look,
    python_functions,
)

RUNTIME = Functions(1, 2, 3, range(0x1000, 0x2000))


def test_a_futex_inside_the_interpreters_state_is_a_wait_for_the_gil() -> None:
    assert RUNTIME.waits_for_the_gil(FUTEX, 0x1234)
    assert not RUNTIME.waits_for_the_gil(FUTEX, 0x2000)  # a lock elsewhere: Event.wait()
    assert not RUNTIME.waits_for_the_gil(7, 0x1234)  # poll, whatever its argument


def waiting(cpu: float, seen: bool = True) -> Threads:
    """A look where the main thread (pid 1) has used ``cpu`` s and waits for the GIL."""
    return Threads([], [1] if seen else [], {1: cpu})


def test_a_gil_held_in_c_is_waited_for_while_its_waiter_does_not_run() -> None:
    search = GilSearch(started=0.0)
    for step in range(1, 2000):  # 20 s of looks; it wakes every 5 ms for microseconds
        seen = step % 10 > 4  # on a loaded machine a woken waiter stays runnable a while
        assert search.keep_looking(waiting(0.001 * step / 100, seen), now=step / 100)
    assert not search.timed_out


def test_threads_taking_turns_at_the_gil_are_busy_not_waited_for() -> None:
    search = GilSearch(started=0.0)
    for step in range(1, 100):  # 1 s of looks
        now = step / 100
        waiter = 1 + step % 2  # the other one runs meanwhile: each half the time
        if not search.keep_looking(Threads([], [waiter], {1: now / 2, waiter: now / 2}), now):
            break
    else:
        pytest.fail("threads running Python in turns were waited for")
    assert now <= 4 * BUSY_MIN and not search.timed_out


def test_a_main_thread_spinning_in_python_is_refused_soon() -> None:
    search = GilSearch(started=0.0)
    assert search.keep_looking(waiting(0.0, seen=False), now=0.0)
    assert not search.keep_looking(waiting(2 * BUSY_MIN, seen=False), now=2 * BUSY_MIN)


def test_nothing_waiting_nor_running_is_refused_after_a_look() -> None:
    search = GilSearch(started=0.0)
    assert search.keep_looking(waiting(0.0, seen=False), now=QUIET / 2)
    assert not search.keep_looking(waiting(0.0, seen=False), now=QUIET)


def test_the_search_has_an_end() -> None:
    search = GilSearch(started=0.0)
    assert not search.keep_looking(waiting(0.0), now=PATIENCE)
    assert search.timed_out


HOLDER = r"""
import re, sys, threading
def hold():
    print("holding", flush=True)
    re.match(r"(a+)+$", "a" * 30 + "b")  # minutes in C, the GIL held
threading.Thread(target=hold, daemon=True).start()
while True:
    pass  # the main thread wants the GIL back: it waits for it
"""


@pytest.mark.skipif(sys.platform != "linux", reason="/proc")
def test_a_main_thread_waiting_for_a_gil_held_in_c_is_not_called_into() -> None:
    proc = subprocess.Popen([sys.executable, "-c", HOLDER], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "holding"
        functions = python_functions(proc.pid)
        deadline = time.monotonic() + 10
        threads = look(proc.pid, functions)
        while proc.pid not in threads.for_the_gil:  # /proc is read: nothing to wait on
            assert time.monotonic() < deadline, f"the main thread never waited: {threads}"
            time.sleep(0.01)
            threads = look(proc.pid, functions)
        assert proc.pid not in threads.safe, threads
        assert threads.cpu[proc.pid] < 1.0  # waiting, not running
    finally:
        proc.kill()
        proc.wait(timeout=10)
