"""The hub's event loop selector, which waits for an answer that is due without sleeping.

Theory of operation. A request the hub relays to a process's pydevd is answered in 0.1-1
ms. Waiting for it in ``epoll_wait``, the hub's process sleeps, and its CPU goes idle; the
answer must then wake both, and on a virtual machine waking an idle vCPU is what costs most
of the hub's share of a request (the bytes, its Python and the socket are ~10%: see
docs/design.md, *per-step-costs*). Told that an answer is due (:meth:`BusyPollSelector.
answer_due`, as a request is written to pydevd), the selector polls without sleeping for
up to :data:`ANSWER_SPIN` seconds, until the first event of any kind; then once more, as
long, for the client's next request (an editor asks ``stackTrace``, ``scopes``,
``variables`` one after the other), whose writing to pydevd starts it again; then sleeps.
Only on a node with half a CPU idle, the hub's own polling counted as idle
(:class:`SpareCpu`): on a busy one, the polling takes the CPU from the process computing
the answer (measured, 2 cores and two busy loops: variables +0.76 ms a request polling,
+0.04 not).
"""

from __future__ import annotations

import asyncio
import os
import selectors
import sys
import time
from collections.abc import Callable, Coroutine
from typing import Any

ANSWER_SPIN = 0.002  # s: longer than most answers take, short enough not to matter if not
CPU_READ_EVERY = 1.0  # s: how often the node's idle time is read (~20 us each)
SPARE = 0.5  # of a CPU, idle on average, for the polling to go on


def cpu_times() -> tuple[float, float] | None:
    """The node's idle and total CPU seconds so far, all its CPUs summed (Linux's
    ``/proc/stat``), or None where they cannot be read."""
    try:
        with open("/proc/stat", "rb") as stat:
            fields = [int(word) for word in stat.readline().split()[1:]]
    except (OSError, ValueError):
        return None
    ticks = os.sysconf("SC_CLK_TCK")
    return (fields[3] + fields[4]) / ticks, sum(fields[:8]) / ticks  # idle + iowait; all


class SpareCpu:
    """Whether the node had :data:`SPARE` of a CPU idle over the last
    :data:`CPU_READ_EVERY` seconds or so (where ``cpu_times`` cannot tell, never), asked as
    often as needed. This process's own CPU time counts as idle: its polling would
    otherwise make the node look busy and turn itself off."""

    def __init__(self, clock: Callable[[], float] = time.monotonic,
                 times: Callable[[], tuple[float, float] | None] = cpu_times,
                 own: Callable[[], float] = time.process_time,
                 cpus: int | None = None) -> None:
        self._clock = clock
        self._times = times
        self._own = own
        self._cpus = cpus or os.cpu_count() or 1  # as many as /proc/stat counts
        self._read_at = float("-inf")
        self._last = times(), own()
        self._spare = False

    def __call__(self) -> bool:
        now = self._clock()
        if now - self._read_at >= CPU_READ_EVERY:
            self._read_at = now
            times, own = self._times(), self._own()
            last, last_own = self._last
            if times is None or last is None or times[1] <= last[1]:
                self._spare = False
            else:
                idle = times[0] - last[0] + own - last_own
                self._spare = idle / (times[1] - last[1]) * self._cpus >= SPARE
            self._last = times, own
        return self._spare


class BusyPollSelector(selectors.DefaultSelector):
    """The platform's default selector, which polls instead of sleeping while an answer is
    due, and then while the client's next request may be (see the module's docstring)."""

    def __init__(self, spin: float = ANSWER_SPIN,
                 spare_cpu: Callable[[], bool] | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        super().__init__()
        self._spin = spin
        self._spare_cpu = spare_cpu or SpareCpu(clock)
        self._clock = clock
        self._poll_until = 0.0  # while a select polls rather than sleeps
        self._next_request_due = False  # polls on once the answer came, for the next request
        self._polled = 0  # selects answered by polling

    def statistics(self) -> dict[str, int]:
        """``found_by_polling``: how many selects found what was due by polling."""
        return {"found_by_polling": self._polled}

    def answer_due(self) -> None:
        """A request went to a process: poll for its answer, if the node has a CPU to spare."""
        if self._spare_cpu():
            self._poll_until = self._clock() + self._spin
            self._next_request_due = True

    def select(self, timeout: float | None = None) -> list[tuple[selectors.SelectorKey, int]]:
        if timeout == 0 or self._poll_until == 0.0:
            return super().select(timeout)
        start = now = self._clock()
        end = self._poll_until if timeout is None else min(self._poll_until, start + timeout)
        while now < end:
            if ready := super().select(0):
                self._polled += 1
                self._poll_until = now + self._spin if self._next_request_due else 0.0
                self._next_request_due = False
                return ready
            now = self._clock()
        if end >= self._poll_until:  # the polling is over (not only this select's time)
            self._poll_until, self._next_request_due = 0.0, False
        return super().select(None if timeout is None else max(0.0, timeout - (now - start)))


def run_polling(selector: BusyPollSelector, main: Coroutine[Any, Any, None]) -> None:
    """``asyncio.run(main)`` on an event loop of ``selector``."""
    if sys.version_info >= (3, 11):
        with asyncio.Runner(loop_factory=lambda: asyncio.SelectorEventLoop(selector)) as runner:
            runner.run(main)
        return
    loop = asyncio.SelectorEventLoop(selector)  # what asyncio.run does, on 3.10
    try:
        asyncio.set_event_loop(loop)
        loop.run_until_complete(main)
    finally:
        try:
            for task in (pending := asyncio.all_tasks(loop)):
                task.cancel()
            loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
            loop.run_until_complete(loop.shutdown_asyncgens())
        finally:
            asyncio.set_event_loop(None)
            loop.close()
