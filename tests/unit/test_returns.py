"""The agent's return watcher, in memory: real threads and frames, no pydevd."""

from __future__ import annotations

import queue
import sys
import threading
from collections.abc import Callable, Iterator
from types import FrameType, SimpleNamespace
from typing import Any

import pytest

from raydebug.agent.debugger.returns import ReturnWatcher, on_stack

WAIT = 5.0
STEP_OVER = 108  # any pydevd step command; -1 means "not stepping"


class Worker:
    """A thread that runs ``task`` when told, then idles in "library" code, as a Ray
    worker's thread waits in the core worker for the next task."""

    def __init__(self, watcher: ReturnWatcher, stepping: bool) -> None:
        self.watcher = watcher
        self.stepping = stepping
        self.frame: queue.Queue[FrameType] = queue.Queue()
        self.go = threading.Event()
        self.stop = threading.Event()
        self.in_callee = threading.Event()
        self.leave_callee = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        info = SimpleNamespace(pydev_step_cmd=STEP_OVER if self.stepping else -1)
        threading.current_thread().additional_info = info  # type: ignore[attr-defined]
        self.task()
        self.stop.wait(WAIT)

    def task(self) -> int:
        self.frame.put(sys._getframe())
        self.go.wait(WAIT)
        self.watcher.on_resumed(threading.get_ident())  # as pydevd resumes it
        self.callee()
        return 42

    def callee(self) -> None:
        self.in_callee.set()
        self.leave_callee.wait(WAIT)


@pytest.fixture
def returned() -> Iterator[queue.Queue[tuple[str, str]]]:
    yield queue.Queue()


def make_watcher(returned: queue.Queue[tuple[str, str]],
                 suspended: Callable[[int], bool] = lambda ident: False,
                 **hooks: Any) -> ReturnWatcher:
    return ReturnWatcher(suspended, lambda sid, value: returned.put((sid, value)), **hooks)


def start(watcher: ReturnWatcher, stepping: bool) -> Worker:
    worker = Worker(watcher, stepping)
    frame = worker.frame.get(timeout=WAIT)
    assert worker.thread.ident is not None
    watcher.follow("s1", worker.thread.ident, frame)
    return worker


def test_a_stepped_function_that_returns_ends_its_session_with_the_value(returned):
    cancelled = threading.Event()
    watcher = make_watcher(returned, returns_to_other_code=lambda frame: True,
                           cancel_step=cancelled.set)
    worker = start(watcher, stepping=True)
    worker.go.set()
    worker.leave_callee.set()
    assert returned.get(timeout=WAIT) == ("s1", "42")
    assert cancelled.is_set()  # it left the user's code: the step is over too
    worker.stop.set()


def test_a_continued_function_ends_its_session_without_a_value(returned):
    watcher = make_watcher(returned)
    worker = start(watcher, stepping=False)
    worker.go.set()
    worker.leave_callee.set()
    assert returned.get(timeout=WAIT) == ("s1", "")
    worker.stop.set()


def test_a_function_still_on_the_stack_goes_on(returned):
    watcher = make_watcher(returned)
    worker = start(watcher, stepping=False)
    worker.go.set()
    assert worker.in_callee.wait(WAIT)
    with pytest.raises(queue.Empty):
        returned.get(timeout=0.5)  # in a callee for longer than the first looks
    worker.leave_callee.set()
    assert returned.get(timeout=WAIT) == ("s1", "")
    worker.stop.set()


def test_a_suspended_thread_is_not_watched(returned):
    suspended = threading.Event()
    watcher = make_watcher(returned, suspended=lambda ident: suspended.is_set())
    worker = start(watcher, stepping=False)
    suspended.set()  # pydevd stopped it again (a breakpoint): the session goes on
    worker.go.set()
    worker.leave_callee.set()
    with pytest.raises(queue.Empty):
        returned.get(timeout=0.5)
    worker.stop.set()


def test_on_stack_finds_callers_only():
    def inner() -> tuple[FrameType, FrameType]:
        return sys._getframe(), sys._getframe(1)

    mine, caller = inner()
    here = sys._getframe()
    assert caller is here and on_stack(here, here) and not on_stack(mine, here)
    assert not on_stack(here, None)


def test_a_new_pause_of_the_thread_takes_what_its_last_function_returned():
    """A Ray worker's thread steps off its task and runs the next task, which pauses before
    the watcher saw the first return: the new pause takes the value (it was lost)."""
    watcher = ReturnWatcher(is_suspended=lambda ident: False,
                            on_returned=lambda session, value: None)
    found: dict[str, Any] = {}

    def first() -> int:
        watcher.follow("first", threading.get_ident(), sys._getframe())
        found["inside"] = watcher.take_return("first", sys._getframe())  # still in it
        return 20

    def second() -> None:
        found["after"] = watcher.take_return("first", sys._getframe())
        found["again"] = watcher.take_return("first", sys._getframe())  # taken once

    first()
    second()
    assert found == {"inside": None, "after": "", "again": None}  # "": the value not seen

