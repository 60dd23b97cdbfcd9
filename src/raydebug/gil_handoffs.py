"""Quick hand-offs of the GIL while raydebug sets itself up in a busy process.

Why. Python makes a thread that wants the GIL wait up to the switch interval (5 ms) for the
thread holding it. Importing raydebug's agent or pydevd reads hundreds of files and gives the
GIL up at each read; with a thread spinning in Python beside it (a hung job's busy loop, the
case a user pauses) every read then costs up to 5 ms more: a pause of such a process took
4.7-5.2 s to import and start pydevd, ~1 s with this (docs/design.md#first-pause). While
:func:`quick_gil_handoffs` is entered the interval is :data:`QUICK_SWITCH_INTERVAL`; the
last thread to leave puts the process's own back (several threads may pause at once).
"""

from __future__ import annotations

import contextlib
import os
import sys
import threading
from collections.abc import Iterator

QUICK_SWITCH_INTERVAL = 0.0002  # seconds (Python's default: 0.005)

_lock = threading.Lock()
_entered = 0  # threads inside quick_gil_handoffs now
_saved = 0.0  # the process's own interval, put back by the last to leave


@contextlib.contextmanager
def quick_gil_handoffs() -> Iterator[None]:
    """Shorten the GIL's switch interval for the duration, then put it back."""
    global _entered, _saved
    with _lock:
        if _entered == 0:
            _saved = sys.getswitchinterval()
            sys.setswitchinterval(min(_saved, QUICK_SWITCH_INTERVAL))
        _entered += 1
    try:
        yield
    finally:
        with _lock:
            if _entered > 0:  # 0: a fork child reset it meanwhile (_reset_in_child)
                _entered -= 1
                if _entered == 0:
                    sys.setswitchinterval(_saved)


def _reset_in_child() -> None:
    """A fork child has only the forking thread: the others that were inside never leave
    here. The process's interval is back; the forking thread, if it was inside, leaves
    without effect."""
    global _entered, _lock
    _lock = threading.Lock()
    if _entered:
        _entered = 0
        sys.setswitchinterval(_saved)


os.register_at_fork(after_in_child=_reset_in_child)
