"""Setting other threads' trace functions without stalling every thread.

Theory of operation. On Python 3.10/3.11 pydevd sets another thread's trace function through
its helper library's ``AttachDebuggerTracing``. Its ``pydevd_tracing.set_trace_to_threads``
first starts a helper thread per thread and waits for it: with busy threads holding the GIL
each wait lasts up to a switch interval, and every thread stalls meanwhile
(docs/design.md#tracing-keeper). :func:`set_trace_in_threads` calls the helper library
directly; the tracing keeper uses it for the *other* threads. pydevd's own calls keep pydevd's
function: a thread's own ``SetTrace`` through the library alone missed, now and then, the
return of a function stepped out of (docs/design.md#first-pause). On 3.12+ pydevd uses
``sys.monitoring`` and calls neither.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable
from typing import Any


def set_trace_in_threads(trace: Any, thread_idents: Iterable[int]) -> int:
    """Make ``trace`` the trace function of each of ``thread_idents`` (Python <= 3.11; other
    threads than the calling one), through pydevd's helper library; 0 on success, -1 without the
    library, else the library's code for a thread it could not trace."""
    import ctypes

    import pydevd_tracing

    lib = pydevd_tracing._load_python_helper_lib()
    if lib is None:
        return -1
    set_trace = pydevd_tracing.TracingFunctionHolder._original_tracing or sys.settrace
    failed = 0
    for ident in thread_idents:
        result = lib.AttachDebuggerTracing(ctypes.c_int(0), ctypes.py_object(set_trace),
                                           ctypes.py_object(trace), ctypes.c_uint(ident),
                                           ctypes.py_object(None))
        failed = failed or result
    return failed


def register_foreign_threads() -> list[int]:
    """Give each thread that runs Python code but was started outside the ``threading``
    module (a Ray threaded actor's method runs on a thread of Ray's C++ pool) a
    ``threading._DummyThread`` with its ident, as pydevd's own start did (its
    ``set_trace_to_threads``) before raydebug had it trace the starting thread only: pydevd
    and a pause know only ``threading``'s threads, so such a thread blocked in C was never
    asked to pause, nor served where it blocks. Python <= 3.11 (what pydevd did there);
    returns the idents registered."""
    if sys.version_info >= (3, 12):
        return []
    import threading

    registered = [ident for ident in sys._current_frames()
                  if ident not in threading._active]  # type: ignore[attr-defined]
    for ident in registered:
        _record_thread(ident)
    return registered


def _record_thread(ident: int) -> None:
    """Put a ``threading._DummyThread`` for thread ``ident`` in ``threading._active`` (its
    ``__init__`` registers it under ``_set_ident``'s ident, here not the caller's)."""
    import threading

    class _Foreign(threading._DummyThread):
        def _set_ident(self) -> None:
            self._ident = ident

    foreign: Any = _Foreign()
    foreign.__class__ = threading._DummyThread
