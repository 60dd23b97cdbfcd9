"""Cluster breakpoints on Python 3.10/3.11: a trace function, only while breakpoints exist.

Since :mod:`.code` rewrites the code of the files with breakpoints, this backend serves
only what rewriting cannot (a file without source, function breakpoints, ...: its module
docstring), on those files only; ``RAYDEBUG_ARMED_BACKEND=trace`` makes it serve all.
:func:`set_in_threads` sets a trace function on chosen threads (:mod:`.code`'s running frames).

Theory of operation. Python before 3.12 has one way to see a line run: the thread's trace
function. While the process has breakpoints, every thread gets ours (present threads and new
ones); on each call it looks at the frame's ``co_filename`` and returns None at once for code
of files without breakpoints (so no line event is ever made for them). For code of a file with
breakpoints it returns a local trace function that looks at each line's number. The last
breakpoint cleared removes it from every thread again: the process runs at full speed.
The ``raised`` exception filter needs the trace function too, for it alone sees a raise: with
it set, the function returns for the user's code (not a library's: :mod:`.raised`) a
local trace function that gets no line events (``f_trace_lines`` off) unless the file has
breakpoints, only its ``exception`` events.

What the per-call check costs in call-heavy code is measured in docs/design.md#armed (it is
the price of the trace function itself, not of our check). pydevd, when a thread stops, puts
its own trace function in place of ours; the agent arms again after pydevd's tracing is
removed (see :meth:`raydebug.agent.agent.Agent`).

Threads that exist already. ``threading.settrace`` covers threads started later; the calling
thread is set directly. For the others we use the helper library that ships with debugpy
(``pydevd_attach_to_process/attach_linux_amd64.so``, loaded with ctypes, without importing
pydevd): ``AttachDebuggerTracing`` sets a trace function in the thread state of any thread
(what ``PyEval_SetTrace`` does for the current one). Limits we accept: a thread that has no
Python frame at the time (a C++ thread of Ray's that enters Python later through
``PyGILState_Ensure``) is not in ``sys._current_frames()`` and is not reached until the set
is sent again; without the helper library (not Linux x86-64 or macOS), only the main thread
(through ``Py_AddPendingCall``) and new threads are reached.
"""

from __future__ import annotations

import ctypes
import importlib.util
import os
import platform
import sys
import threading
from collections.abc import Callable
from types import FrameType
from typing import Any

from ..report import say
from .raised import is_library
from .watch import Watched

TraceFunction = Callable[[FrameType, str, Any], Any]


class TracingBackend:
    """See the module docstring. Thread-safe (install/remove under one lock)."""

    # Ours and pydevd's are the same per-thread trace function: installed while pydevd
    # traces, ours would replace its tracer (its breakpoints and steps would be lost).
    shares_trace_function = True

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._installed: TraceFunction | None = None

    def install(self, armed: Watched) -> None:
        with self._lock:
            trace, local = _trace_functions(armed)
            self._installed = trace
            _set_everywhere(trace)
            # A frame already running code of a watched file (a loop that never calls
            # again) gets its line events from now on.
            for top in sys._current_frames().values():
                frame: FrameType | None = top
                while frame is not None:
                    if frame.f_code.co_filename in armed.files:
                        frame.f_trace = local
                        armed.note_code_loaded(frame.f_code)
                    elif (armed.raised and frame.f_trace is None
                          and not is_library(frame.f_code.co_filename)):
                        frame.f_trace_lines = False  # its raises only
                        frame.f_trace = local
                    frame = frame.f_back

    def forget_after_fork(self) -> None:
        self._lock = threading.Lock()
        self.remove()

    def remove(self) -> None:
        with self._lock:
            if self._installed is None:
                return
            self._installed = None
            _set_everywhere(None)
            for top in sys._current_frames().values():
                frame: FrameType | None = top
                while frame is not None:
                    if getattr(frame.f_trace, "raydebug_armed", False):
                        frame.f_trace = None
                        frame.f_trace_lines = True
                    frame = frame.f_back

    def active(self) -> bool:
        return self._installed is not None


def _trace_functions(armed: Watched) -> tuple[TraceFunction, TraceFunction]:
    """The thread's trace function and the local one, closed over this set's files."""
    files = armed.files
    functions = armed.functions
    lines_of = armed.lines_of
    on_line = armed.on_line
    raised = armed.raised
    seen: set[Any] = set()

    def local(frame: FrameType, event: str, arg: Any) -> None:
        if event == "line" and frame.f_lineno in lines_of(frame.f_code.co_filename):
            on_line(frame, frame.f_lineno)
        elif event == "exception" and raised:
            armed.on_raise(frame, arg[1], arg[2])
        # None keeps the frame's trace function: ours, or pydevd's if a hit put it there
        # (returning ours would take the frame back from pydevd and lose its steps).

    def trace(frame: FrameType, event: str, arg: Any) -> Any:
        code = frame.f_code
        if code.co_filename not in files:
            if raised and not is_library(code.co_filename):
                frame.f_trace_lines = False
                return local
            return None
        if code not in seen:
            seen.add(code)
            armed.note_code_loaded(code)
        return local

    def trace_with_functions(frame: FrameType, event: str, arg: Any) -> Any:
        code = frame.f_code
        if code.co_name in functions or getattr(code, "co_qualname", None) in functions:
            armed.on_function(frame)
        return trace(frame, event, arg)

    for function in (local, trace, trace_with_functions):
        setattr(function, "raydebug_armed", True)  # noqa: B010 (marks ours for remove())
    return (trace_with_functions if functions else trace), local


def raw_settrace() -> Callable[[Any], None]:
    """``sys.settrace`` itself: pydevd, once imported, replaces it with a warning wrapper."""
    holder = getattr(sys.modules.get("pydevd_tracing"), "TracingFunctionHolder", None)
    original = getattr(holder, "_original_tracing", None)
    return original if original is not None else sys.settrace


def _set_everywhere(trace: TraceFunction | None) -> None:
    """Make ``trace`` (None: no trace function) every thread's, present and future."""
    set_trace = raw_settrace()
    threading.settrace(trace)
    # raydebug's own threads (the link's, the tracing keeper's) are never traced.
    invisible = {thread.ident for thread in threading.enumerate()
                 if getattr(thread, "pydev_do_not_trace", False)}
    current = threading.get_ident()
    if current not in invisible or trace is None:
        set_trace(trace)
    others = [ident for ident in sys._current_frames()
              if ident != current and ident not in invisible]
    if not others:
        return
    lib = _helper_library()
    if trace is None:
        # The helper sets a function; this one takes itself out at the thread's next event.
        def remove_myself(frame: FrameType, event: str, arg: Any) -> None:
            set_trace(None)

        target: TraceFunction = remove_myself
    else:
        target = trace
    if lib is None:
        _main_thread_only(set_trace, trace, others)
        return
    for ident in others:
        lib.AttachDebuggerTracing(ctypes.c_int(0), ctypes.py_object(set_trace),
                                  ctypes.py_object(target), ctypes.c_uint(ident),
                                  ctypes.py_object(None))


def set_in_threads(trace: TraceFunction | None, idents: set[int]) -> bool:
    """Make ``trace`` the trace function of the threads ``idents`` only (the current one
    directly, others through the helper library); False when some could not be reached."""
    set_trace = raw_settrace()
    current = threading.get_ident()
    if current in idents:
        set_trace(trace)
    others = idents - {current}
    if not others:
        return True
    lib = _helper_library()
    if lib is None:
        return False
    for ident in others:
        lib.AttachDebuggerTracing(ctypes.c_int(0), ctypes.py_object(set_trace),
                                  ctypes.py_object(trace), ctypes.c_uint(ident),
                                  ctypes.py_object(None))
    return True


_helper: list[Any] = []  # [library or None], loaded once


def _helper_library() -> Any:
    """debugpy's helper library for setting another thread's trace function, or None."""
    if _helper:
        return _helper[0]
    lib = None
    names = {"Linux": "attach_linux_amd64.so", "Darwin": "attach_x86_64.dylib"}
    name = names.get(platform.system()) if platform.machine() in ("x86_64", "AMD64") else None
    spec = importlib.util.find_spec("debugpy") if name else None  # finds, imports nothing
    if name and spec is not None and spec.submodule_search_locations:
        path = os.path.join(next(iter(spec.submodule_search_locations)), "_vendored", "pydevd",
                            "pydevd_attach_to_process", name)
        try:
            lib = ctypes.pydll.LoadLibrary(path)  # pydll: keeps the GIL while it works
        except OSError as error:
            say(f"breakpoints reach only new threads and the main thread here ({error})")
    _helper.append(lib)
    return lib


_pending: list[Any] = []  # keeps the pending-call callbacks alive until they ran


def _main_thread_only(set_trace: Callable[[Any], None], trace: TraceFunction | None,
                      others: list[int]) -> None:
    """Without the helper library: the main thread sets ``trace`` itself, at its next
    bytecode boundary (``Py_AddPendingCall``); other existing threads are not reached."""
    if threading.main_thread().ident not in others:
        return

    def set_in_main_thread(_: Any) -> int:
        set_trace(trace)
        return 0

    in_main_thread = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p)(set_in_main_thread)
    _pending.append(in_main_thread)
    ctypes.pythonapi.Py_AddPendingCall(in_main_thread, None)
