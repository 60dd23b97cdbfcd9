"""Which threads a pause serves where they block in C (``blocked_threads``): one that runs
the user's code, at its innermost user frame; the main thread always; another thread that
runs library code only (Ray's ``PythonGCThread`` in its ``Event.wait``) never: it is let go,
not made a session a client would be moved to. Real threads; "the user's code" is any file
outside the standard library here (pydevd's "just my code" in the agent)."""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable, Iterator
from types import FrameType

import pytest

from raydebug.agent.debugger.blocked_threads import BlockedThreads, where_served
from raydebug.agent.own_frames import is_standard_library


def innermost_user_frame(frame: FrameType) -> FrameType | None:
    found: FrameType | None = frame
    while found is not None and is_standard_library(found.f_code.co_filename):
        found = found.f_back
    return found


def user_code_waiting(gate: threading.Event) -> None:
    gate.wait()  # blocked in C, called from the user's line


@pytest.fixture
def gate() -> Iterator[threading.Event]:
    gate = threading.Event()
    yield gate
    gate.set()


def started(target: Callable[[], object], name: str) -> threading.Thread:
    thread = threading.Thread(target=target, name=name, daemon=True)
    thread.start()
    return thread


def top_frame(thread: threading.Thread) -> FrameType:
    """``thread``'s innermost frame once it waits in ``Event.wait`` (bounded)."""
    for _ in range(200):
        top = sys._current_frames().get(thread.ident or 0)
        if top is not None and top.f_code.co_name == "wait":
            return top
        threading.Event().wait(0.01)
    raise TimeoutError(f"{thread.name} never waited")


def test_a_thread_blocked_in_the_users_code_is_served_at_the_users_line(gate):
    thread = started(lambda: user_code_waiting(gate), "user")
    served = where_served(top_frame(thread), innermost_user_frame, is_main=False)
    assert served is not None and served.f_code.co_name == "user_code_waiting"


def test_a_thread_that_runs_library_code_only_is_not_served(gate):
    thread = started(gate.wait, "PythonGCThread")  # threading.py frames only
    assert where_served(top_frame(thread), innermost_user_frame, is_main=False) is None


def test_the_main_thread_is_served_in_library_code_too(gate):
    """A Ray worker between tasks: its session says it runs no task."""
    thread = started(gate.wait, "MainThread-like")
    top = top_frame(thread)
    assert where_served(top, innermost_user_frame, is_main=True) is top


def test_a_pause_lets_go_a_library_thread_blocked_in_c_and_stands_in_for_none(gate):
    thread = started(gate.wait, "PythonGCThread")
    top_frame(thread)
    let_go: list[threading.Thread] = []
    done = threading.Event()
    blocked = BlockedThreads(innermost_user_frame)
    blocked.watch([thread], lambda _: True,
                  lambda thread: (let_go.append(thread), done.set()))
    assert done.wait(5), "the watch never decided"
    assert let_go == [thread]
    assert not blocked.is_standing_in(thread.ident or 0)
    assert blocked._stand_ins == {}
