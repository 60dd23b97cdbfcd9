"""A stop made outside pydevd's trace function, kept from being traced by pydevd itself.

Theory of operation. pydevd stops a thread from inside its trace function (or a
``sys.monitoring`` callback), where the interpreter traces nothing: the Python the stop runs
is never seen by pydevd. raydebug also stops threads from ordinary calls: the call that
rewritten code makes before a cluster breakpoint's line (3.10/3.11), a signal handler on a
thread blocked in C. There pydevd's tracer is on for the thread and sees every call the stop
makes into files it does not skip (``contextlib``'s ``helper`` for pydevd's own
``track_frames``, an import's finder, the session's record): once the thread is told to
suspend it stops *there*, a second time, and a client with ``justMyCode: false`` is shown
that library frame above the user's line (``evaluate`` of the user's locals then fails).
:class:`Untraced` turns pydevd's tracing off for the current thread meanwhile, as pydevd's
own stop from user code does (``trigger_exception_handler``): its re-entrancy count
(``additional_info.is_tracing``), and on 3.12+ its ``sys.monitoring`` callbacks for the
thread. Steps after the stop are traced again.
"""

from __future__ import annotations

import sys
import threading
from types import TracebackType
from typing import Any


class Untraced:
    """While entered, pydevd does not trace ``thread`` (the current one, pydevd started).

    A class with ``__enter__``/``__exit__`` here, not a generator context manager: entering
    it runs no code of a file pydevd traces. Re-entrant (pydevd counts).
    """

    def __init__(self, py_db: Any, thread: threading.Thread) -> None:
        self._info = getattr(thread, "additional_info", None) or \
            py_db.set_additional_thread_info(thread)
        self._monitoring: Any = None
        if sys.version_info >= (3, 12):
            from _pydevd_sys_monitoring import pydevd_sys_monitoring

            self._monitoring = pydevd_sys_monitoring
        self._resume_monitoring = False

    def __enter__(self) -> None:
        if self._monitoring is not None:
            self._resume_monitoring = bool(self._monitoring.suspend_current_thread_tracing())
        self._info.is_tracing += 1

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 traceback: TracebackType | None) -> None:
        self._info.is_tracing -= 1
        if self._resume_monitoring:
            self._monitoring.resume_current_thread_tracing()
