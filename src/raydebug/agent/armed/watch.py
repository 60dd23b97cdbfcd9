"""What an arm backend (:mod:`.monitoring`, :mod:`.tracing`) is given and does:
the seam between the cluster breakpoints of :mod:`.breakpoints` and the interpreter."""

from __future__ import annotations

from collections.abc import Mapping
from types import CodeType, FrameType, TracebackType
from typing import Any, Protocol


class Watched(Protocol):
    """The armed set, as a backend reads it on its hot path."""

    @property
    def files(self) -> frozenset[str]:
        """The ``co_filename`` values with breakpoints."""

    @property
    def functions(self) -> frozenset[str]:
        """Function breakpoint names (a name or a qualname)."""

    @property
    def raised(self) -> bool:
        """Whether the ``raised`` exception filter is set: report raises to :meth:`on_raise`."""

    def lines_of(self, filename: str) -> Mapping[int, Any]:
        """The lines of ``filename`` with breakpoints."""

    def on_line(self, frame: FrameType, line: int) -> bool:
        """``frame`` is about to run ``line``, which has breakpoints; True if it paused."""

    def on_function(self, frame: FrameType) -> bool:
        """A function with a function breakpoint starts in ``frame``; True if it paused."""

    def on_raise(self, frame: FrameType, exception: BaseException,
                 traceback: TracebackType | None) -> bool:
        """``exception`` was raised in ``frame`` (or came out into it from a callee); True if
        it paused."""

    def note_code_loaded(self, code: CodeType) -> None:
        """Code of a watched file runs for the first time."""


class Backend(Protocol):
    """How breakpoints reach the interpreter (one per Python version family)."""

    def install(self, armed: Watched) -> None:
        """Start watching ``armed.files`` (again, if they changed); idempotent."""

    def remove(self) -> None:
        """Stop watching anything: no trace function, no monitoring events."""

    def active(self) -> bool:
        """Whether anything is installed in the interpreter now."""

    def forget_after_fork(self) -> None:
        """In a fork child: :meth:`remove`, with locks of its own (the parent's threads
        are gone, and a lock one of them held stays held)."""
