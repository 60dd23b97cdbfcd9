"""Ctrl-C at the prompt is never lost, even when it lands while readline is busy.

Theory of operation. CPython's ``input()`` with readline waits for keys in ``select()`` and
looks for signals only when that ``select()`` fails with ``EINTR`` (``Modules/readline.c``,
``readline_until_enter_or_signal``). Two ways a Ctrl-C typed just after some keys was lost
(the prompt never came back, and the next keys were taken as the same line):

- the terminal flushes its input queue at Ctrl-C. Keys that ``select()`` had seen but
  readline had not read yet are gone, and readline then blocks in its own read
  (``rl_getc``), which retries on ``EINTR`` and looks at no Python signal;
- a SIGINT that arrives while readline is busy (handling keys, redrawing), or that the
  kernel hands to another thread, is recorded by Python's handler but interrupts no
  ``select()``: nothing looks at it until the line is done.

(How often that happened, and the probe: docs/design.md#prompt-interrupt.) So while a
prompt waits for a line, :class:`PromptInterrupts` keeps the terminal from flushing at
Ctrl-C (``NOFLSH``: readline reads every key it was told of, and discards the line itself),
and has Python's signal handler also write each signal's number to a pipe
(``signal.set_wakeup_fd``). A watcher thread that reads SIGINT (or SIGTERM, which
``raydebug attach`` turns into a quiet exit) from it nudges the main
thread with :data:`NUDGE`, whose handler does nothing, until the prompt has taken the
interrupt (or stopped waiting): the nudge fails the ``select()`` with ``EINTR``, readline
looks at the signals, and ``input()`` raises the ``KeyboardInterrupt`` that was waiting. A
nudge is never a second interrupt; one that lands anywhere else runs a handler that does
nothing.
"""

from __future__ import annotations

import contextlib
import os
import signal
import termios
import threading
import time
from collections.abc import Iterator

NUDGE = signal.SIGUSR1
NUDGE_EVERY = 0.02  # seconds between nudges, until the prompt takes the interrupt
NUDGE_FOR = 2.0  # seconds: then give up (the prompt is stuck elsewhere, not in select)


class PromptInterrupts:
    """Makes a waiting prompt take every Ctrl-C; create with :meth:`install`."""

    def __init__(self, read_fd: int, write_fd: int, previous_wakeup: int,
                 previous_nudge: signal._HANDLER) -> None:
        self._read_fd = read_fd
        self._write_fd = write_fd
        self._previous_wakeup = previous_wakeup
        self._previous_nudge = previous_nudge
        self._main = threading.main_thread().ident or 0
        self._lock = threading.Lock()
        self._waiting = False  # a prompt waits for a line in input()
        self._taken = 0  # interrupts the prompt has taken
        self._watcher = threading.Thread(target=self._watch, name="raydebug-prompt-interrupts",
                                         daemon=True)
        self._watcher.start()

    @classmethod
    def install(cls) -> PromptInterrupts | None:
        """Set it up (on the main thread); None where it cannot be: on another thread, with
        no SIGUSR1 free, or with a wakeup fd already in use."""
        if threading.current_thread() is not threading.main_thread():
            return None
        if signal.getsignal(NUDGE) not in (signal.SIG_DFL, None):
            return None  # someone's handler: not ours to replace
        read_fd, write_fd = os.pipe()
        os.set_blocking(write_fd, False)  # written by a signal handler: must never block
        previous_wakeup = signal.set_wakeup_fd(write_fd, warn_on_full_buffer=False)
        if previous_wakeup != -1:  # someone else's: put it back, do without
            signal.set_wakeup_fd(previous_wakeup)
            os.close(read_fd)
            os.close(write_fd)
            return None
        previous_nudge = signal.signal(NUDGE, _nothing)
        return cls(read_fd, write_fd, previous_wakeup, previous_nudge)

    @contextlib.contextmanager
    def prompt(self, fd: int) -> Iterator[None]:
        """Around one ``input()`` from the terminal ``fd``: interrupts that arrive meanwhile
        reach it."""
        flushing = _stop_flushing_at_interrupt(fd)
        with self._lock:
            self._waiting = True
        try:
            yield
        finally:
            with self._lock:
                self._waiting = False
            if flushing is not None:
                _set_lflag(fd, flushing)

    def taken(self) -> None:
        """The prompt has taken an interrupt (its KeyboardInterrupt was caught)."""
        with self._lock:
            self._taken += 1

    def close(self) -> None:
        """Put back what :meth:`install` replaced (on the main thread); the watcher ends."""
        signal.set_wakeup_fd(self._previous_wakeup)
        with self._lock:
            self._waiting = False  # a nudging watcher stops
        os.close(self._write_fd)  # the watcher reads end of file, and ends
        # Only then the nudge's handler goes: a nudge sent after it would meet SIGUSR1's
        # default action, which ends the process.
        self._watcher.join(NUDGE_FOR + 1.0)
        signal.signal(NUDGE, self._previous_nudge)

    def _watch(self) -> None:
        try:
            while True:
                data = os.read(self._read_fd, 64)
                if not data:
                    return
                if signal.SIGINT in data or signal.SIGTERM in data:  # (see attach)
                    self._nudge_until_taken()
        except OSError:
            return
        finally:
            with contextlib.suppress(OSError):
                os.close(self._read_fd)

    def _nudge_until_taken(self) -> None:
        with self._lock:
            taken = self._taken
        deadline = time.monotonic() + NUDGE_FOR
        while time.monotonic() < deadline:
            with self._lock:
                if not self._waiting or self._taken != taken:
                    return
            try:
                signal.pthread_kill(self._main, NUDGE)
            except (OSError, ValueError):  # the main thread is gone: nothing to wake
                return
            time.sleep(NUDGE_EVERY)


def _stop_flushing_at_interrupt(fd: int) -> int | None:
    """Set ``NOFLSH`` on the terminal ``fd``; the local flags to put back (None: unchanged)."""
    try:
        lflag = termios.tcgetattr(fd)[3]
    except (termios.error, OSError):
        return None
    if lflag & termios.NOFLSH:
        return None
    return lflag if _set_lflag(fd, lflag | termios.NOFLSH) else None


def _set_lflag(fd: int, lflag: int) -> bool:
    try:
        attributes = termios.tcgetattr(fd)
        attributes[3] = lflag
        termios.tcsetattr(fd, termios.TCSANOW, attributes)
    except (termios.error, OSError):
        return False
    return True


def _nothing(signum: int, frame: object) -> None:
    """The nudge's handler: its only job was to fail the prompt's select() with EINTR."""
