"""Frames of a rewritten file that were already running its original code when the set was
armed (Python 3.10/3.11: a loop, a task that started before the set arrived).

Theory of operation. Swapping a function's ``__code__`` reaches its next call, not a frame
that runs the old code now, and such a frame may never return (a loop). So :mod:`.code`
hands those frames (:func:`running_frames`) to :class:`RunningFrames`, which gives each a
local trace function of its own, for its line events, and sets on their threads only a
trace function that traces no call (no other frame there is traced). Each frame's local
tracing ends as it returns, and the thread's trace function with the last of its frames.
A thread that cannot be reached (no helper library: :func:`.tracing.set_in_threads`) leaves
nothing set, and the caller traces those files instead.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Mapping
from types import CodeType, FrameType
from typing import Any, Protocol

from ..report import say
from .tracing import TracingBackend, raw_settrace, set_in_threads
from .watch import Watched


class Rewriting(Protocol):
    """What the running frames read of the backend that rewrote their files."""

    armed: Watched | None  # the armed set; None once removed

    def hooked_lines(self, code: CodeType) -> frozenset[int]:
        """The lines at which ``code`` (if rewritten) calls the arm itself."""


class RunningFrames:
    """Frames of a rewritten file that were running the original code when armed: a trace
    function on their threads only (returning None for every call: no other frame is traced)
    and line events for those frames, until each returns."""

    def __init__(self, backend: Rewriting, tracing: TracingBackend) -> None:
        self._backend = backend
        self._tracing = tracing  # the backend's fallback: while on, it has every thread
        self._pending: dict[int, set[FrameType]] = {}

    def active(self) -> bool:
        """Whether some frame is still followed."""
        return bool(self._pending)

    def follow(self, running: Mapping[int, list[FrameType]]) -> bool:
        """Trace ``running`` (thread -> frames) instead of what was; False if a thread
        could not be reached (then nothing is left set)."""
        gone = set(self._pending) - set(running)
        for pending in self._pending.values():
            for frame in pending:
                if getattr(frame.f_trace, "raydebug_armed", False):
                    frame.f_trace = None
        self._pending = {}
        if gone and not self._tracing.active():
            set_in_threads(_remove_myself, gone)
        if not running:
            return True
        self._pending = {ident: set(frames) for ident, frames in running.items()}
        local = self._local
        for frames in running.values():
            for frame in frames:
                frame.f_trace = local
        if set_in_threads(_calls_untraced, set(running)):
            return True
        self.follow({})
        return False

    def _local(self, frame: FrameType, event: str, arg: Any) -> None:
        # An exception here would reach the user's code (and end the thread's tracing).
        try:
            self._event(frame, event)
        except Exception as error:
            say(f"a breakpoint failed ({type(error).__name__}: {error})")

    def _event(self, frame: FrameType, event: str) -> None:
        backend = self._backend
        armed = backend.armed
        if armed is None:
            return
        if event == "line":
            line = frame.f_lineno
            if (line in armed.lines_of(frame.f_code.co_filename)
                    and line not in backend.hooked_lines(frame.f_code)):
                armed.on_line(frame, line)
        elif event == "return":
            ident = threading.get_ident()
            pending = self._pending.get(ident)  # follow() may replace the dict meanwhile
            if pending is not None:
                pending.discard(frame)
                if not pending and self._pending.pop(ident, None) is not None \
                        and not self._tracing.active():  # else the fallback's, everywhere
                    _remove_myself(frame, event, None)


def _calls_untraced(frame: FrameType, event: str, arg: Any) -> None:
    """A thread's trace function that traces no call (the running frames have their own)."""


def _remove_myself(frame: FrameType, event: str, arg: Any) -> None:
    raw_settrace()(None)


for _function in (_calls_untraced, RunningFrames._local):
    setattr(_function, "raydebug_armed", True)  # noqa: B010 (marks ours)


def running_frames(files: frozenset[str], current: set[int]) -> dict[int, list[FrameType]]:
    """Frames of ``files`` on some thread's stack that run code other than ``current``."""
    running: dict[int, list[FrameType]] = {}
    for ident, top in sys._current_frames().items():
        frame: FrameType | None = top
        while frame is not None:
            if frame.f_code.co_filename in files and id(frame.f_code) not in current:
                running.setdefault(ident, []).append(frame)
            frame = frame.f_back
    return running
