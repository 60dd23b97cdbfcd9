"""A main thread blocked in C really stops: a real-time signal raydebug owns.

Theory of operation. pydevd suspends a thread at its next Python line, so a thread blocked
in C (a lock, ``Event.wait()``, ``queue.get()``, ``time.sleep()``, a socket, ``ray.get``)
never stops for ``raydebug pause``. The main thread has a way back into Python: a signal
sent to it (``signal.pthread_kill``) makes its blocking system call fail with ``EINTR``,
the interpreter runs the signal's Python handler on the main thread, and, once the handler
returns, retries the call (PEP 475). So:

- at link or setup time, on the main thread, :func:`install` takes the highest real-time
  signal whose handler is ``SIG_DFL`` (so no one else's: a user's handler is never
  replaced; with none free, or no real-time signals, the main thread stops as before);
- when a pause asks the main thread and it has not suspended within :data:`KICK_AFTER`
  (it runs no Python), :func:`kick_main_thread` sends it that signal;
- the handler asks the agent's ``pause_blocked_main(frame)`` to stop in ``frame``, the
  user's frame that was blocked: the stop's stack starts there, so the handler's own
  frames are never shown to a client. ``continue`` returns from the handler and the
  blocking call goes on. A signal that comes when no pause is wanted does nothing.

Which blocking calls this interrupts, per Python version: docs/design.md#pause-signal.
"""

from __future__ import annotations

import signal
import threading
import time
from collections.abc import Callable
from types import FrameType

KICK_AFTER = 0.2  # seconds: a main thread that runs Python suspends well within this

_signal: int | None = None  # the signal raydebug installed its handler for
_on_blocked_main: Callable[[FrameType], None] | None = None


def install() -> int | None:
    """Install raydebug's handler for a free real-time signal; returns that signal, or None
    (not on the main thread, no real-time signals here, or every one is taken). Idempotent;
    never raises."""
    global _signal
    if _signal is not None:
        return _signal
    if threading.current_thread() is not threading.main_thread():
        return None  # signal.signal works only there
    low, high = getattr(signal, "SIGRTMIN", None), getattr(signal, "SIGRTMAX", None)
    if low is None or high is None:
        return None
    for candidate in range(high, low - 1, -1):  # the highest: libraries take the lowest
        try:
            if signal.getsignal(candidate) is not signal.SIG_DFL:
                continue
            signal.signal(candidate, _handle)
        except (OSError, ValueError):
            continue
        _signal = candidate
        return candidate
    return None


def installed() -> int | None:
    """The signal raydebug's handler is installed for, or None."""
    return _signal


def serve(on_blocked_main: Callable[[FrameType], None]) -> None:
    """Call ``on_blocked_main(frame)`` on the main thread when the signal comes (the
    process's agent, as it is made)."""
    global _on_blocked_main
    _on_blocked_main = on_blocked_main


def kick_main_thread(still_blocked: Callable[[], bool],
                     after: float = KICK_AFTER) -> threading.Thread | None:
    """Send the signal to the main thread ``after`` seconds from now if ``still_blocked()``
    says then that it has not stopped, and the handler there is still raydebug's (a program
    that took the signal since gets nothing from us). Returns at once the thread that waits
    (invisible to pydevd), or None if there is no signal to send."""
    if _signal is None:
        return None
    sent = _signal
    main = threading.main_thread().ident

    def kick() -> None:
        time.sleep(after)
        if main is not None and still_blocked() and signal.getsignal(sent) is _handle:
            try:
                signal.pthread_kill(main, sent)
            except (OSError, ValueError):  # the main thread has ended
                pass

    thread = threading.Thread(target=kick, name="raydebug-pause-signal", daemon=True)
    thread.pydev_do_not_trace = True  # type: ignore[attr-defined]  # see mark_invisible
    thread.is_pydev_daemon_thread = True  # type: ignore[attr-defined]
    thread.start()
    return thread


def forget_after_fork() -> None:
    """In a fork child: the handler stays installed (signal dispositions are inherited), but
    the parent's agent must not be called; the child's agent serves it again."""
    global _on_blocked_main
    _on_blocked_main = None


def _handle(signum: int, frame: FrameType | None) -> None:
    """The signal's handler, on the main thread: ``frame`` is where it was (in C) when the
    signal came. Never raises into the user's code."""
    target = _on_blocked_main
    if target is None or frame is None:
        return
    try:
        target(frame)
    except Exception as error:  # raydebug must never break the user's program
        from .report import say

        say(f"could not pause the main thread ({type(error).__name__}: {error}); "
            "it runs on")
