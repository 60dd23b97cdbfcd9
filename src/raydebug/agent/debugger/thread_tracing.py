"""Setting a thread's trace function from another thread, without stalling every thread.

Theory of operation. On Python 3.10/3.11 pydevd sets another thread's trace function (and, in
``pydevd_tracing.SetTrace``, the calling thread's own) through its helper library's
``AttachDebuggerTracing``. Its ``pydevd_tracing.set_trace_to_threads`` first starts a helper
thread per thread and waits for it, to raise a counter Python 3.10 no longer has: with busy
threads holding the GIL each wait lasts up to a switch interval, and every thread stalls
meanwhile (docs/design.md#tracing-keeper). :func:`set_trace_in_threads` calls the helper library
directly, and :func:`install` makes it pydevd's ``set_trace_to_threads``, for pydevd's own
calls: its start traces every thread, and each thread's first traced call goes through
``SetTrace`` (docs/design.md#first-pause). On 3.12+ pydevd uses ``sys.monitoring`` and calls
neither.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Iterable
from typing import Any


def install() -> None:
    """Make pydevd set trace functions through :func:`set_trace_to_threads` (pydevd started,
    its vendored modules importable). Idempotent."""
    import pydevd_tracing

    pydevd_tracing.set_trace_to_threads = set_trace_to_threads


def set_trace_to_threads(tracing_func: Any, thread_idents: Iterable[int] | None = None,
                         create_dummy_thread: bool = True) -> int:
    """``pydevd_tracing.set_trace_to_threads`` without its helper thread per thread: make
    ``tracing_func`` the trace function of ``thread_idents`` (all threads but pydevd's and
    raydebug's if None); 0 on success, else pydevd's non-zero code (-1: no helper library,
    and ``SetTrace`` falls back to ``sys.settrace``).

    ``create_dummy_thread`` is ignored: pydevd makes a thread started outside ``threading``
    known when it runs its first traced call (``threading.current_thread()``), as it does for
    threads the tracing keeper traces again."""
    if thread_idents is None:
        invisible = {thread.ident for thread in threading.enumerate()
                     if getattr(thread, "pydev_do_not_trace", False)}
        thread_idents = [ident for ident in sys._current_frames() if ident not in invisible]
    return set_trace_in_threads(tracing_func, thread_idents)


def set_trace_in_threads(trace: Any, thread_idents: Iterable[int]) -> int:
    """Make ``trace`` the trace function of each of ``thread_idents`` (Python <= 3.11), the
    calling thread's included, through pydevd's helper library; 0 on success, -1 without the
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
