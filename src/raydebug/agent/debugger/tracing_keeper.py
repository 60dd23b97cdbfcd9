"""Tracing follows need: pydevd's tracing is on only while something needs it.

Theory of operation. On Python <= 3.11 pydevd's trace function, once installed, makes
pure-Python code run several times slower in every thread, attached client or not, for the
rest of the process's life (docs/design.md#lazy-debugpy); Ray reuses its worker processes,
so later tasks would pay. So tracing follows need, not attachment
(docs/design.md#tracing-keeper): it is on only while a thread is suspended, stepping, paused
or about to stop, or the client has breakpoints set (line, function, or caught-exception
filters). It is armed again, in every thread, before pydevd handles a request that sets
breakpoints or pauses (:meth:`TracingKeeper.before_request`), and when a thread pauses
(:meth:`TracingKeeper.arm_locked`). :class:`TracingKeeper`'s thread, invisible to pydevd,
removes it when nothing needs it: never inside a trace function or under the agent's lock.
On 3.12+ pydevd uses sys.monitoring, which costs nothing while idle; it is stopped and
started the same way.

Tracing is set and removed in other threads through pydevd's helper library
(:mod:`.thread_tracing`), not pydevd's own ``set_trace_to_threads``, which waits for a helper
thread per thread while every thread stalls.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import sys
import threading
import time
from collections.abc import Callable
from types import FrameType
from typing import Any

from ..report import say
from .start import mark_invisible
from .suspensions import ABOUT_TO_STOP, Suspensions
from .thread_tracing import set_trace_in_threads

STEPPING = "a thread is stepping"
ASKED_TO_PAUSE = "a thread is asked to pause"
TRANSIENT_NEEDS = (ABOUT_TO_STOP, STEPPING, ASKED_TO_PAUSE)
RECHECK_SECONDS = 0.005
FOLLOWUP_SECONDS = (0.002, 0.01, 0.05)  # removal again after these waits (see _keep_tracing)
ARMING_COMMANDS = frozenset({"pause", "setBreakpoints", "setFunctionBreakpoints",
                             "setExceptionBreakpoints"})
# Requests that only look (or change a value): what needs tracing is the same after them, so
# the keeper is not woken (it would compete for the GIL with the thread that answers them).
LOOKING_COMMANDS = frozenset({"threads", "stackTrace", "scopes", "variables", "evaluate",
                              "source", "modules", "loadedSources", "exceptionInfo",
                              "completions", "setVariable", "setExpression"})
_COMMAND = re.compile(r'"command"\s*:\s*"([A-Za-z]+)"')


class TracingKeeper:
    """Removes pydevd's tracing when nothing needs it, and puts it back on demand.

    ``lock`` is held by whoever installs or removes tracing (the debugger's start lock:
    tracing is never changed while pydevd starts). Thread-safe.
    """

    def __init__(self, lock: threading.Lock, suspensions: Suspensions,
                 on_untraced: Callable[[], None] | None = None) -> None:
        self._lock = lock
        self._suspensions = suspensions
        # After each removal (lock held; it must not take it): removing pydevd's trace
        # function removed every other one too (cluster breakpoints' on 3.10/3.11 go back).
        self._on_untraced = on_untraced or (lambda: None)
        self._py_db: Any = None
        self._traced = False  # pydevd's tracing is installed in the process's threads
        self._untraced = threading.Event()  # set while tracing is off
        self._reconsider = threading.Event()  # wakes the keeper (see _keep_tracing)

    def start(self, py_db: Any) -> None:
        """pydevd has just started (``lock`` held): keep its tracing from now on.

        On 3.10/3.11 pydevd's start traced the calling thread only (see ``start``): that is
        taken out here, so the process runs untraced until something needs tracing, and
        the next :meth:`arm_locked` traces every thread. On 3.12+ pydevd's start monitors
        every thread, and the keeper looks at once, not at the first request: a first
        pause waits for its client in raydebug, untraced.
        """
        self._py_db = py_db
        self._traced = True
        if sys.version_info < (3, 12):
            with contextlib.suppress(Exception):  # else the keeper tries, and says how it went
                remove_tracing(py_db)
                self._on_untraced()
                self._traced = False
                self._untraced.set()
        if self._traced:
            self._reconsider.set()
        keeper = threading.Thread(target=self._keep_tracing, name="raydebug-tracing",
                                  daemon=True)
        mark_invisible(keeper)
        keeper.start()

    def reconsider(self) -> None:
        """Ask for tracing to be removed if nothing needs it any more (returns at once)."""
        self._reconsider.set()

    def arm_locked(self, calling_thread: bool = True) -> None:
        """Install pydevd's tracing in every thread, present and future (``lock`` held);
        not in the calling thread with ``calling_thread=False``, for a caller that calls
        ``pydevd.settrace`` next (which traces it: twice would start and wait for a second
        helper thread of pydevd's)."""
        if self._traced:
            return
        _install_tracing(self._py_db, calling_thread)
        self._traced = True
        self._untraced.clear()

    def before_request(self, json_contents: Any) -> None:
        """Before pydevd acts on a client's request: arm tracing for one that needs it."""
        if _arming_request(json_contents):
            with self._lock:
                self.arm_locked()

    def after_request(self, json_contents: Any) -> None:
        """pydevd has acted on a client's request: reconsider, unless it only looked."""
        if _command(json_contents) not in LOOKING_COMMANDS:
            self.reconsider()

    def wait_untraced(self, timeout: float) -> bool:
        """Wait until tracing is off (for tests and benchmarks); False on timeout."""
        return self._untraced.wait(timeout)

    def is_traced(self) -> bool:
        return self._traced

    def _keep_tracing(self) -> None:
        """The keeper's thread: remove pydevd's tracing whenever nothing needs it."""
        recheck: float | None = None
        followups: list[float] = []
        while True:
            # pydevd changes a thread's stepping state without telling us: while only that
            # kind of need keeps tracing on, look again soon.
            self._reconsider.wait(followups[0] if followups else recheck)
            self._reconsider.clear()
            recheck = None
            try:
                with self._lock:
                    if not self._traced:
                        # A thread that was still inside pydevd's trace function when
                        # tracing was removed (just resumed) can put it back on its way
                        # out: remove it again, a few times, until the process stays clean.
                        if followups:
                            followups.pop(0)
                            remove_tracing(self._py_db)
                            self._on_untraced()
                        continue
                    followups = []
                    need = self._needs_tracing()
                    if os.environ.get("RAYDEBUG_DEBUG_TRACING"):
                        say(f"tracing {time.time():.3f}: {need or 'not needed: removing it'}")
                    if need in TRANSIENT_NEEDS:
                        recheck = RECHECK_SECONDS
                    elif need is None:
                        remove_tracing(self._py_db)
                        self._on_untraced()
                        self._traced = False
                        self._untraced.set()
                        followups = list(FOLLOWUP_SECONDS)
            except Exception as error:  # the process keeps running, only slower
                say(f"could not remove the debugger's tracing ({type(error).__name__}: "
                    f"{error}); this process may run slower until the next pause")

    def _needs_tracing(self) -> str | None:
        """What needs pydevd's tracing now (see the module's docstring), or None."""
        from _pydevd_bundle.pydevd_constants import STATE_SUSPEND

        need = self._suspensions.tracing_need()
        if need is not None:
            return need
        py_db = self._py_db
        breakpoints = (py_db.breakpoints, py_db.file_to_id_to_line_breakpoint,
                       py_db.file_to_id_to_plugin_breakpoint)
        if any(any(per_file.values()) for per_file in breakpoints):
            return "line breakpoints"
        # Uncaught-exception filters need no tracing here: raydebug's own hooks take
        # uncaught exceptions (post-mortem), and VS Code sets that filter by default.
        if py_db.function_breakpoint_name_to_breakpoint:
            return "function breakpoints"
        if py_db.break_on_caught_exceptions or py_db.break_on_user_uncaught_exceptions:
            return "exception breakpoints"
        if py_db.has_plugin_line_breaks or py_db.has_plugin_exception_breaks:
            return "plugin breakpoints"
        for thread in threading.enumerate():
            info = getattr(thread, "additional_info", None)
            if info is not None and info.pydev_step_cmd != -1:
                return STEPPING
            if info is not None and info.pydev_state == STATE_SUSPEND:
                return ASKED_TO_PAUSE
        return None


def _arming_request(json_contents: Any) -> bool:
    """Whether a DAP request (pydevd's raw text) sets breakpoints or pauses threads."""
    text = json_contents.decode("utf-8", "replace") if isinstance(json_contents, bytes) \
        else str(json_contents)
    if '"pause"' not in text and 'Breakpoints"' not in text:
        return False  # the common case, without parsing
    try:
        command = json.loads(text).get("command")
    except (ValueError, AttributeError):
        return False
    return command in ARMING_COMMANDS


def _command(json_contents: Any) -> str | None:
    """The ``command`` of a DAP request in pydevd's raw text, found without parsing it (a
    key inside a string value has escaped quotes: it cannot match)."""
    text = json_contents.decode("utf-8", "replace") if isinstance(json_contents, bytes) \
        else str(json_contents)
    found = _COMMAND.search(text)
    return found.group(1) if found else None


def remove_tracing(py_db: Any) -> None:
    """Take pydevd's tracing out of every thread, present and future.

    Each other thread takes it out of itself, at its next Python event (a call, or a line or
    return of the frame it is in now): its trace function, and the frames' own trace
    functions, which pydevd leaves on the frames it traced (after a ``pause``, every frame
    of the thread's stack) and which would get their frames' line events until the thread's
    next call, and could put pydevd's thread tracer back meanwhile. Here no thread walks
    another's frames: on 3.11 following ``f_back`` of a running thread's frames crashed a
    Ray actor once (a SIGSEGV in ``PyFrame_GetBack``, docs/design.md#breakpointhook); a
    thread's own stack is as safe to walk as a traceback. A removal that pydevd's tracing
    came back after (:func:`_install_tracing`) is not carried out late."""
    from _pydev_bundle.pydev_monkey import undo_patch_thread_modules
    from _pydevd_bundle.pydevd_constants import PYDEVD_USE_SYS_MONITORING

    undo_patch_thread_modules()  # new threads start untraced
    if PYDEVD_USE_SYS_MONITORING:  # Python >= 3.12
        from _pydevd_sys_monitoring import pydevd_sys_monitoring

        pydevd_sys_monitoring.stop_monitoring(all_threads=True)
        return
    import pydevd_tracing

    original_settrace = pydevd_tracing.TracingFunctionHolder._original_tracing or sys.settrace
    threading.settrace(None)  # type: ignore[arg-type,unused-ignore]
    removal = _REMOVALS.begin()

    def remove_myself(frame: Any, event: str, arg: Any) -> None:
        """Runs in each thread at its next Python event: as its trace function (a call),
        or as the trace function of the frame it was in (a line, a return)."""
        if _REMOVALS.current(removal):
            _untrace_stack(frame)
            if sys.gettrace() is remove_myself:  # not another's since (armed breakpoints')
                original_settrace(None)
        return None  # a frame's trace function that returns None leaves that frame

    current = threading.get_ident()
    _set_trace_in_threads(remove_myself, skip_invisible=False)
    for ident, top in sys._current_frames().items():
        if ident != current:
            top.f_trace = remove_myself  # its own frame only: no walk of that thread's
    original_settrace(None)
    _untrace_stack(sys._getframe())


def _untrace_stack(frame: FrameType | None) -> None:
    """Clear pydevd's trace function from ``frame`` and its callers (the calling thread's
    own), leaving the armed breakpoints' (:mod:`..armed`: put back after each removal,
    perhaps before this thread got to carry it out)."""
    while frame is not None:
        if not getattr(frame.f_trace, "raydebug_armed", False):
            frame.f_trace = None
        frame = frame.f_back


class _Removals:
    """Which removal of tracing is the latest, and whether tracing came back since: a
    thread that carries out a removal late (at its next Python event) must not take out
    the tracing put back after it."""

    def __init__(self) -> None:
        self._count = 0

    def begin(self) -> int:
        self._count += 1
        return self._count

    def cancel(self) -> None:
        self._count += 1

    def current(self, removal: int) -> bool:
        return removal == self._count


_REMOVALS = _Removals()


def _install_tracing(py_db: Any, calling_thread: bool = True) -> None:
    """Put pydevd's tracing back in every thread, present and future (after remove_tracing);
    the calling thread's only if ``calling_thread``."""
    from _pydevd_bundle.pydevd_constants import PYDEVD_USE_SYS_MONITORING

    _REMOVALS.cancel()  # a removal a thread has not carried out yet is not carried out
    py_db.patch_threads()  # new threads start traced
    if PYDEVD_USE_SYS_MONITORING:
        py_db.enable_tracing(apply_to_all_threads=True)  # starts sys.monitoring again
        return
    _set_trace_in_threads(py_db.trace_dispatch, skip_invisible=True)
    if calling_thread and not getattr(threading.current_thread(), "pydev_do_not_trace", False):
        import pydevd_tracing

        pydevd_tracing.SetTrace(py_db.trace_dispatch)  # e.g. a post-mortem thread


def _set_trace_in_threads(trace: Any, skip_invisible: bool) -> None:
    """Make ``trace`` the trace function of every other thread (Python <= 3.11), skipping
    raydebug's own threads if ``skip_invisible``, through pydevd's helper library with no
    helper thread per thread (see :mod:`.thread_tracing`). Raises RuntimeError without
    that library."""
    current = threading.get_ident()
    invisible = {thread.ident for thread in threading.enumerate()
                 if getattr(thread, "pydev_do_not_trace", False)} if skip_invisible else set()
    idents = [ident for ident in sys._current_frames()
              if ident != current and ident not in invisible]
    result = set_trace_in_threads(trace, idents)
    if result == -1:
        raise RuntimeError("pydevd's tracing helper library is not available here")
    if os.environ.get("RAYDEBUG_DEBUG_TRACING"):
        say(f"tracing: set {getattr(trace, '__name__', trace)} in threads {idents}: {result}")
