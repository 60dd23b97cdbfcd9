"""The GIL's switch interval is short while any thread is inside ``quick_gil_handoffs`` and
the process's own again once the last has left, whatever the order; a fork child does not
keep the short one for a thread it does not have."""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Iterator

import pytest

from raydebug.gil_handoffs import QUICK_SWITCH_INTERVAL, quick_gil_handoffs

OWN = 0.004  # a process's own interval, unlike Python's default and the quick one


@pytest.fixture(autouse=True)
def own_interval() -> Iterator[None]:
    before = sys.getswitchinterval()
    sys.setswitchinterval(OWN)
    yield
    sys.setswitchinterval(before)


def test_short_inside_and_put_back_after():
    with quick_gil_handoffs():
        assert sys.getswitchinterval() == pytest.approx(QUICK_SWITCH_INTERVAL)
    assert sys.getswitchinterval() == pytest.approx(OWN)


def test_put_back_after_an_error():
    with pytest.raises(RuntimeError), quick_gil_handoffs():
        raise RuntimeError("the import failed")
    assert sys.getswitchinterval() == pytest.approx(OWN)


def test_two_threads_overlapping_the_last_to_leave_puts_it_back():
    """Two pauses at once: the first to leave must not restore it under the other, nor the
    second restore the short one it found (which left the process at 0.2 ms for good)."""
    inside, leave = threading.Event(), threading.Event()
    seen: list[float] = []

    def other() -> None:
        with quick_gil_handoffs():
            inside.set()
            leave.wait(10)
            seen.append(sys.getswitchinterval())

    thread = threading.Thread(target=other)
    with quick_gil_handoffs():
        thread.start()
        assert inside.wait(10)
    assert sys.getswitchinterval() == pytest.approx(QUICK_SWITCH_INTERVAL)  # other is in
    leave.set()
    thread.join(10)
    assert seen == [pytest.approx(QUICK_SWITCH_INTERVAL)]
    assert sys.getswitchinterval() == pytest.approx(OWN)


def test_a_fork_child_gets_the_process_interval_back():
    """Forked from inside: the child has its own interval back at once, its thread leaves
    the scope without effect, and the scope works again after."""
    read, write = os.pipe()
    with quick_gil_handoffs():
        pid = os.fork()
        if pid == 0:
            os.write(write, repr(sys.getswitchinterval()).encode())
    if pid == 0:
        with quick_gil_handoffs():
            os.write(write, b" " + repr(sys.getswitchinterval()).encode())
        os.write(write, b" " + repr(sys.getswitchinterval()).encode())
        os._exit(0)
    os.close(write)
    os.waitpid(pid, 0)
    with os.fdopen(read) as said:
        values = [float(word) for word in said.read().split()]
    assert values == [pytest.approx(OWN), pytest.approx(QUICK_SWITCH_INTERVAL),
                      pytest.approx(OWN)]
