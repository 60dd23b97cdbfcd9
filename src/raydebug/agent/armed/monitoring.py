"""Cluster breakpoints on Python >= 3.12: ``sys.monitoring`` on the code of their files only.

Theory of operation. raydebug takes a tool id of its own (not pydevd's ``DEBUGGER_ID``, so the
two coexist when a thread is being debugged) and turns on one global event, ``PY_START``. Its
callback runs once per code object: for code of a file without breakpoints it returns
``DISABLE``, so that code never calls us again and runs at full speed; for code of a file with
breakpoints it turns on that code's ``LINE`` events (``set_local_events``), whose callback
returns ``DISABLE`` for every line without a breakpoint. Code that is loaded later (an import,
a function Ray unpickles for a task) is seen at its first call the same way: no import hook,
no walk of ``gc.get_objects()``. Frames already running when the set arrives (a loop that
never calls again) get their code's ``LINE`` events at once. A new set restarts the events
(``restart_events``) so that code disabled under the old set is looked at again.

The ``raised`` exception filter turns on the global ``RAISE`` event (global only: it cannot be
set on some code, and ``DISABLE`` does not apply to it), so every raise in the process, also a
library's, calls :meth:`MonitoringBackend._raise` while the filter is set; which stop is
:mod:`.raised`'s. ``PY_START`` is on only while there are line or function breakpoints.

Removing the last breakpoint frees the tool id: no callback of ours is left anywhere.

After a stop. Tools are called from the highest id down, so pydevd's (0) gets the stop's event
after ours; in a later session of the process its events on this code are on, and it has the
client's breakpoints by then: it would stop a second time where the thread just was (a
continue stopped twice, a step "ran on" to the same line). So, before our callback returns,
pydevd's ``LINE`` callback is swapped for one that does nothing, and our ``INSTRUCTION``
event is turned on for this code: CPython calls it for the same instruction right after every
tool's ``LINE`` callback, and it puts pydevd's callback back (and turns itself off). pydevd's
own guard against a line seen twice does not serve: it compares the line with ``is``, and its
Cython build (the one in use) boxes a C int to compare, a new object past Python's cached ints
(256), whatever object it was given; nor does a wrapper that calls pydevd's callback, which
takes the frame at a fixed depth. Another thread's line event inside that window (a few
bytecodes of ours) does not reach pydevd.
"""

from __future__ import annotations

import sys
import threading
from types import CodeType, FrameType
from typing import Any

from .raised import is_library
from .watch import Watched

TOOL_NAME = "raydebug"
# sys.monitoring's DEBUGGER_ID (0, pydevd's), COVERAGE_ID (1), PROFILER_ID (2) and
# OPTIMIZER_ID (5) are spoken for by convention; 3 and 4 are free.
TOOL_IDS = (3, 4)


class MonitoringBackend:
    """See the module docstring. Thread-safe (install/remove under one lock)."""

    shares_trace_function = False  # a sys.monitoring tool of our own, beside pydevd's

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._tool: int | None = None
        self._armed: Watched | None = None
        self._watched: set[CodeType] = set()
        self._skipping: dict[int, tuple[CodeType, Any]] = {}  # thread -> (code, pydevd's)

    def install(self, armed: Watched) -> None:
        monitoring: Any = sys.monitoring  # type: ignore[attr-defined,unused-ignore]
        events = monitoring.events
        with self._lock:
            if self._tool is None:
                self._tool = _take_tool_id(monitoring)
                monitoring.register_callback(self._tool, events.PY_START, self._py_start)
                monitoring.register_callback(self._tool, events.LINE, self._line)
                monitoring.register_callback(self._tool, events.RAISE, self._raise)
                monitoring.register_callback(self._tool, events.INSTRUCTION, self._instruction)
            tool = self._tool
            self._armed = armed
            for code in self._watched:
                monitoring.set_local_events(tool, code, 0)
            self._watched = set()
            monitoring.set_events(tool, (events.PY_START if armed.files or armed.functions
                                         else 0) | (events.RAISE if armed.raised else 0))
            monitoring.restart_events()
            for top in sys._current_frames().values():
                frame: FrameType | None = top
                while frame is not None:
                    if frame.f_code.co_filename in armed.files:
                        self._watch_locked(frame.f_code)
                    frame = frame.f_back

    def forget_after_fork(self) -> None:
        self._lock = threading.Lock()
        self.remove()

    def remove(self) -> None:
        monitoring: Any = sys.monitoring  # type: ignore[attr-defined,unused-ignore]
        with self._lock:
            tool, self._tool, self._armed = self._tool, None, None
            if tool is None:
                return
            for _code, pydevd in self._skipping.values():  # a stop's skip under way
                monitoring.register_callback(monitoring.DEBUGGER_ID, monitoring.events.LINE,
                                             pydevd)
            self._skipping = {}
            monitoring.set_events(tool, 0)
            for code in self._watched:
                monitoring.set_local_events(tool, code, 0)
            self._watched = set()
            monitoring.register_callback(tool, monitoring.events.PY_START, None)
            monitoring.register_callback(tool, monitoring.events.LINE, None)
            monitoring.register_callback(tool, monitoring.events.RAISE, None)
            monitoring.register_callback(tool, monitoring.events.INSTRUCTION, None)
            monitoring.free_tool_id(tool)

    def active(self) -> bool:
        # Asked of the interpreter, not of self._tool: remove() lets go of that first, and
        # a disarm then looked done while the tool was still registered (a loaded run of
        # test_ray_py312 read the tool's id after active() said False).
        monitoring: Any = sys.monitoring  # type: ignore[attr-defined,unused-ignore]
        return any(monitoring.get_tool(tool) == TOOL_NAME for tool in TOOL_IDS)

    # -- callbacks (hot path: keep them short) ---------------------------------------------

    def _py_start(self, code: CodeType, offset: int) -> Any:
        armed = self._armed
        if armed is None:
            return sys.monitoring.DISABLE  # type: ignore[attr-defined,unused-ignore]
        if code.co_filename in armed.files:
            with self._lock:
                if self._armed is armed:
                    self._watch_locked(code)
            armed.note_code_loaded(code)
        if armed.functions and (getattr(code, "co_qualname", None) in armed.functions
                                or code.co_name in armed.functions):
            armed.on_function(sys._getframe(1))
            return None  # called again at its next start
        return sys.monitoring.DISABLE  # type: ignore[attr-defined,unused-ignore]

    def _line(self, code: CodeType, line: int) -> Any:
        armed = self._armed
        if armed is None or line not in armed.lines_of(code.co_filename):
            return sys.monitoring.DISABLE  # type: ignore[attr-defined,unused-ignore]
        if armed.on_line(sys._getframe(1), line):
            self._skip_pydevd_line(code)
        return None

    def _raise(self, code: CodeType, offset: int, exception: BaseException) -> Any:
        # Called for every raise in the process: a library's returns after one dict lookup.
        if is_library(code.co_filename):
            return None
        armed = self._armed
        if armed is not None:
            armed.on_raise(sys._getframe(1), exception, exception.__traceback__)
        return None

    def _skip_pydevd_line(self, code: CodeType) -> None:
        """After a stop at a line: pydevd's tool skips this line event (module docstring)."""
        monitoring: Any = sys.monitoring  # type: ignore[attr-defined,unused-ignore]
        events = monitoring.events
        tool = self._tool
        if tool is None or monitoring.get_tool(monitoring.DEBUGGER_ID) is None:
            return
        pydevd = monitoring.register_callback(monitoring.DEBUGGER_ID, events.LINE, _nothing)
        if pydevd is None or pydevd is _nothing:  # no callback; or a skip under way
            monitoring.register_callback(monitoring.DEBUGGER_ID, events.LINE, pydevd)
            return
        self._skipping[threading.get_ident()] = (code, pydevd)
        monitoring.set_local_events(tool, code, monitoring.get_local_events(tool, code)
                                    | events.INSTRUCTION)

    def _instruction(self, code: CodeType, offset: int) -> Any:
        skipping = self._skipping.pop(threading.get_ident(), None)
        if skipping is None:
            return None  # another thread, in the few bytecodes of the window
        monitoring: Any = sys.monitoring  # type: ignore[attr-defined,unused-ignore]
        monitoring.register_callback(monitoring.DEBUGGER_ID, monitoring.events.LINE,
                                     skipping[1])
        tool = self._tool
        if tool is not None:
            monitoring.set_local_events(tool, code, monitoring.get_local_events(tool, code)
                                        & ~monitoring.events.INSTRUCTION)
        return None

    def _watch_locked(self, code: CodeType) -> None:
        if code in self._watched or self._tool is None:
            return
        monitoring: Any = sys.monitoring  # type: ignore[attr-defined,unused-ignore]
        self._watched.add(code)
        monitoring.set_local_events(self._tool, code, monitoring.events.LINE)


def _take_tool_id(monitoring: Any) -> int:
    for tool in TOOL_IDS:
        if monitoring.get_tool(tool) is None:
            monitoring.use_tool_id(tool, TOOL_NAME)
            return tool
    raise RuntimeError(f"sys.monitoring tool ids {TOOL_IDS} are all in use")


def _nothing(code: CodeType, line: int) -> None:
    """pydevd's line callback for the one event it must not see."""
