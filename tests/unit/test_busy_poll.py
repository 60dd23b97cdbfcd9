"""The hub's selector polls without sleeping while an answer is due and the node has CPU to
spare, then for the client's next request, and sleeps as any selector otherwise; whether the
node has half a CPU idle is read from its CPU times at most once a second."""

from __future__ import annotations

import selectors
import socket
import threading
import time
from collections.abc import Iterator

import pytest

from raydebug.hub.busy_poll import CPU_READ_EVERY, BusyPollSelector, SpareCpu


@pytest.fixture
def pair() -> Iterator[tuple[socket.socket, socket.socket]]:
    ours, theirs = socket.socketpair()
    yield ours, theirs
    ours.close()
    theirs.close()


def selector_on(sock: socket.socket, spare: bool, spin: float = 10.0) -> BusyPollSelector:
    selector = BusyPollSelector(spin=spin, spare_cpu=lambda: spare)
    selector.register(sock, selectors.EVENT_READ)
    return selector


def write_later(sock: socket.socket, delay: float = 0.02) -> threading.Timer:
    timer = threading.Timer(delay, sock.send, (b"x",))
    timer.start()
    return timer


def found_by_polling(selector: BusyPollSelector) -> int:
    return selector.statistics()["found_by_polling"]


def test_an_answer_due_is_found_by_polling_then_the_next_request(pair):
    ours, theirs = pair
    selector = selector_on(ours, spare=True)
    selector.answer_due()
    write_later(theirs)  # while the select polls
    assert [key.fileobj for key, _ in selector.select(None)] == [ours]
    assert found_by_polling(selector) == 1
    ours.recv(16)
    assert selector.select(0.05) == []  # the next request's wait: a select's own timeout
    write_later(theirs)
    assert selector.select(None) and found_by_polling(selector) == 2
    ours.recv(16)
    theirs.send(b"x")  # nothing is due any more: found, but by a select that would sleep
    assert selector.select(None) and found_by_polling(selector) == 2
    selector.close()


def test_without_an_idle_cpu_or_an_answer_due_it_sleeps(pair):
    ours, theirs = pair
    for spare, due in ((False, True), (True, False)):
        selector = selector_on(ours, spare)
        if due:
            selector.answer_due()
        write_later(theirs)
        assert selector.select(5.0) and found_by_polling(selector) == 0
        ours.recv(16)
        selector.close()


def test_a_select_that_must_not_wait_does_not_poll(pair):
    ours, _ = pair
    selector = selector_on(ours, spare=True)
    selector.answer_due()
    started = time.monotonic()
    assert selector.select(0) == []
    assert time.monotonic() - started < 1.0 and found_by_polling(selector) == 0
    selector.close()


def test_the_polling_ends_after_its_time_and_the_select_sleeps_out_the_rest(pair):
    ours, _ = pair
    selector = selector_on(ours, spare=True, spin=0.01)
    selector.answer_due()
    started = time.monotonic()
    assert selector.select(0.2) == []
    assert time.monotonic() - started >= 0.2
    selector.close()


class CpuTimes:
    """A node's CPU times and the hub's own a test sets, and how often they were read."""

    def __init__(self) -> None:
        self.idle, self.total, self.own, self.reads = 0.0, 0.0, 0.0, 0

    def __call__(self) -> tuple[float, float]:
        self.reads += 1
        return self.idle, self.total

    def run(self, idle: float, busy: float, own: float = 0.0) -> None:
        """``idle`` and ``busy`` CPU seconds went by, ``own`` of the busy ones the hub's."""
        self.idle += idle
        self.total += idle + busy
        self.own += own


def spare_cpu_of(times: CpuTimes, now: list[float], cpus: int) -> SpareCpu:
    return SpareCpu(clock=lambda: now[0], times=times, own=lambda: times.own, cpus=cpus)


def test_an_idle_cpu_is_half_a_cpu_idle_since_the_last_reading():
    now = [0.0]
    times = CpuTimes()
    spare = spare_cpu_of(times, now, cpus=2)
    for idle, busy, expected in ((0.6, 1.4, True), (0.4, 1.6, False), (0.5, 1.5, True)):
        times.run(idle, busy)
        now[0] += CPU_READ_EVERY
        assert spare() is expected, (idle, busy)
    reads = times.reads
    times.run(0.0, 2.0)
    now[0] += CPU_READ_EVERY / 2
    assert spare() is True and times.reads == reads  # read again only after a while


def test_the_hubs_own_polling_does_not_count_as_busy():
    now = [0.0]
    times = CpuTimes()
    spare = spare_cpu_of(times, now, cpus=2)
    times.run(0.1, 1.9, own=0.5)  # the hub polled for half a CPU: it would give it up
    now[0] += CPU_READ_EVERY
    assert spare() is True
    times.run(0.1, 1.9, own=0.1)  # another process took it
    now[0] += CPU_READ_EVERY
    assert spare() is False


def test_cpu_times_that_cannot_be_read_mean_no_idle_cpu():
    now = [0.0]
    spare = SpareCpu(clock=lambda: now[0], times=lambda: None, cpus=8)
    now[0] += CPU_READ_EVERY
    assert spare() is False


def test_this_node_s_cpu_times_are_read():
    from raydebug.hub.busy_poll import cpu_times

    times = cpu_times()
    assert times is not None and 0 <= times[0] <= times[1]
