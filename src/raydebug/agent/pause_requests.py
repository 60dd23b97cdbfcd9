"""A pause request: one thread ``raydebug pause`` asked to stop, from the ask to its end.

Theory of operation. The agent keeps one :class:`PauseRequest` per thread asked and not yet
stopped. Each follows the lifecycle of :mod:`raydebug.session` (``asked -> stopped |
blocked | cancelled | expired``): it ends when its thread stops (a session is made), when
``raydebug pause --cancel`` withdraws it (``CancelPause``), or when the asker's wait is over
(``Pause.expire_ms``: nothing stopped in time, :func:`expire_later`). A withdrawn request is
taken back from pydevd too, so that the thread, when it returns to Python, runs on untraced.
The hub is told how many requests are pending, and since when (:func:`pending_message`),
each time that changes: ``raydebug ps`` shows ``pause requested`` with its age.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from ..protocol.control import PausePending
from ..session import PauseRequestEvent, PauseRequestState, next_pause_request_state


@dataclass
class PauseRequest:
    """A thread that ``raydebug pause`` asked pydevd to suspend, which has not stopped yet."""

    thread: threading.Thread
    identity: dict[str, Any]  # the process's cluster ids, read when the pause was asked
    asked_at: float = field(default_factory=time.time)
    state: PauseRequestState = PauseRequestState.ASKED

    def move(self, event: PauseRequestEvent) -> None:
        """Follow ``event``; raises :class:`~raydebug.errors.LocalProtocolError` if this
        request cannot (it has ended)."""
        self.state = next_pause_request_state(self.state, event)


def pending_message(requests: Iterable[PauseRequest]) -> PausePending:
    """What the hub is told of ``requests``: how many are pending, the oldest's ask."""
    pending = [r for r in requests if r.state in (PauseRequestState.ASKED,
                                                    PauseRequestState.BLOCKED)]
    since = min((r.asked_at for r in pending), default=0.0)
    return PausePending(threads=len(pending), since_ms=round(since * 1000))


def expire_later(after: float, expire: Callable[[], object]) -> None:
    """Call ``expire()`` ``after`` seconds from now, on a thread of its own invisible to
    pydevd; returns at once."""
    def wait_then_expire() -> None:
        time.sleep(after)
        expire()

    thread = threading.Thread(target=wait_then_expire, name="raydebug-pause-expiry",
                              daemon=True)
    thread.pydev_do_not_trace = True  # type: ignore[attr-defined]  # see mark_invisible
    thread.is_pydev_daemon_thread = True  # type: ignore[attr-defined]
    thread.start()
