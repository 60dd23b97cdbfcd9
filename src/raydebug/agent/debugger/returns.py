"""Noticing that the function a session paused in has returned, while a client runs it.

Theory of operation. pydevd suspends a thread only in code it traces: once a stepped or
continued thread leaves the user's function for code pydevd will not stop in (Ray's core
worker waiting for the next task, a thread's ``run`` ending), no ``stopped`` event ever comes
and a client would wait forever. So each session remembers its *frame*: the outermost frame
it has been suspended in (stepping into a callee keeps it; stepping out into the caller moves
it there). After the thread resumes under a client, a watcher thread looks at the thread's
stack (``sys._current_frames()``) a few times, quickly at first, then once a second while
the thread runs; when the frame is gone from it on two looks in a row, and the thread is not
suspended in pydevd, the function has returned and the session ends (:data:`END_RETURNED`).
The watcher looks only while some session's thread runs under a client; as soon as that
thread suspends again, its session ends, or the client leaves, it waits (one thread, started
at the first resume and kept: not one per step).

pydevd keeps no return value for a step over the last line, so while the thread *steps*
(not while it continues: that runs at full speed), a profile function on that thread alone
(``sys.setprofile``, independent of pydevd's ``sys.settrace``) records what the frame
returns, and wakes the watcher. If that return leaves the user's code (a library called the
function), the step is cancelled: the session is over, as pdb's is at the end of a program,
rather than stopped in whatever non-library code runs next.
"""

from __future__ import annotations

import reprlib
import sys
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from types import FrameType
from typing import Any

from .start import mark_invisible

WATCH_DELAYS = (0.02, 0.05, 0.1, 0.2, 0.5)  # seconds between looks after a resume
WATCH_EVERY = 1.0  # then, while the thread runs on
MISSES_TO_END = 2  # the frame absent on this many looks in a row: it returned
_REPR = reprlib.Repr()
_REPR.maxstring = _REPR.maxother = 160


@dataclass
class _Followed:
    thread_ident: int
    frame: FrameType
    running: bool = False  # resumed under a client, not suspended since
    misses: int = 0
    returned: str | None = None  # repr of the return value, when the profile function saw it


def on_stack(frame: FrameType, top: FrameType | None) -> bool:
    """Whether ``frame`` is ``top`` or one of its callers."""
    while top is not None:
        if top is frame:
            return True
        top = top.f_back
    return False


class ReturnWatcher:
    """Follows the frames of the process's sessions; thread-safe.

    ``on_returned(session_id, returned)`` is called on the watcher thread (no lock held) once
    per session whose function returned; ``returned`` is the value's repr, or "" if unknown.
    """

    def __init__(self, is_suspended: Callable[[int], bool],
                 on_returned: Callable[[str, str], None],
                 returns_to_other_code: Callable[[FrameType], bool] = lambda frame: False,
                 cancel_step: Callable[[], None] = lambda: None) -> None:
        self._is_suspended = is_suspended
        self._on_returned = on_returned
        self._returns_to_other_code = returns_to_other_code
        self._cancel_step = cancel_step
        self._lock = threading.Lock()
        self._followed: dict[str, _Followed] = {}
        self._wake = threading.Event()
        self._thread: threading.Thread | None = None

    def follow(self, session_id: str, thread_ident: int, frame: FrameType) -> None:
        with self._lock:
            self._followed[session_id] = _Followed(thread_ident, frame)

    def take_return(self, session_id: str, frame: FrameType) -> str | None:
        """For a session whose thread pauses anew at ``frame``: if its function is no longer
        on that stack (it returned, and the thread went on into other code: a Ray worker's
        next task), stop following it and give the repr of what it returned ("" when that
        was not seen); None while it is still on the stack (the new pause is inside it), or
        when the session is not followed."""
        with self._lock:
            followed = self._followed.get(session_id)
            if followed is None or on_stack(followed.frame, frame):
                return None
            del self._followed[session_id]
            return followed.returned or ""

    def forget(self, session_id: str) -> None:
        with self._lock:
            self._followed.pop(session_id, None)

    def on_suspended(self, thread_ident: int, frame: FrameType | None) -> None:
        """Called on the thread as it suspends in pydevd at ``frame``."""
        with self._lock:
            for followed in self._of_thread(thread_ident):
                followed.running = False
                followed.misses = 0
                if frame is not None and not on_stack(followed.frame, frame):
                    followed.frame = frame  # stepped out into a caller: the session goes on
                    followed.returned = None
        if isinstance(sys.getprofile(), _ReturnHook):
            sys.setprofile(None)

    def on_resumed(self, thread_ident: int) -> None:
        """Called on the thread as a client resumes it: watch for its frame's return."""
        with self._lock:
            followed = self._of_thread(thread_ident)
            for each in followed:
                each.running = True
                each.misses = 0
            if not followed:
                return
            if _is_stepping() and sys.getprofile() is None:
                sys.setprofile(_ReturnHook(followed, self._wake, self._at_return))
            self._wake.set()
            if self._thread is None:
                self._thread = threading.Thread(target=self._watch, name="raydebug-returns",
                                                daemon=True)
                mark_invisible(self._thread)
                self._thread.start()

    def _at_return(self, frame: FrameType) -> None:
        """On the stepping thread, as a followed frame returns."""
        if self._returns_to_other_code(frame):
            self._cancel_step()

    def stop_watching(self) -> None:
        """The client left: nothing runs under it any more."""
        with self._lock:
            for followed in self._followed.values():
                followed.running = False

    def _of_thread(self, thread_ident: int) -> list[_Followed]:
        return [f for f in self._followed.values() if f.thread_ident == thread_ident]

    def _watch(self) -> None:
        """The watcher thread. Started once and kept, idle on its event while nothing runs
        under a client: a thread started at every step would make the stepping thread wait
        for the new thread's first GIL turn (up to a switch interval with busy threads:
        docs/design.md#per-step-costs)."""
        delays: Iterator[float] = iter(())
        while True:
            if self._wake.is_set():
                self._wake.clear()
                delays = iter(WATCH_DELAYS)
            self._wake.wait(next(delays, WATCH_EVERY))
            returned = self._look()
            for session_id, value in returned:
                self._on_returned(session_id, value)
            with self._lock:
                idle = not any(f.running for f in self._followed.values())
            if idle:
                self._wake.wait()  # until a thread resumes under a client again

    def _look(self) -> list[tuple[str, str]]:
        frames = sys._current_frames()
        returned = []
        with self._lock:
            for session_id, followed in list(self._followed.items()):
                if not followed.running:
                    continue
                if self._is_suspended(followed.thread_ident):
                    followed.running = False
                    continue
                if on_stack(followed.frame, frames.get(followed.thread_ident)):
                    followed.misses = 0
                    continue
                followed.misses += 1
                if followed.misses >= MISSES_TO_END:
                    del self._followed[session_id]
                    returned.append((session_id, followed.returned or ""))
        return returned


class _ReturnHook:
    """A profile function for one stepping thread: records what its followed frames return."""

    def __init__(self, followed: list[_Followed], wake: threading.Event,
                 at_return: Callable[[FrameType], None]) -> None:
        self._followed = followed
        self._wake = wake
        self._at_return = at_return

    def __call__(self, frame: FrameType, event: str, arg: Any) -> None:
        if event != "return":
            return
        for followed in self._followed:
            if frame is followed.frame:
                followed.returned = _REPR.repr(arg)
                sys.setprofile(None)
                self._at_return(frame)
                self._wake.set()
                return


def _is_stepping() -> bool:
    """Whether pydevd resumed the current thread to step (not to continue)."""
    info = getattr(threading.current_thread(), "additional_info", None)
    return getattr(info, "pydev_step_cmd", -1) not in (-1, None)
