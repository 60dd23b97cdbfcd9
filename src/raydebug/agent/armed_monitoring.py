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

Removing the last breakpoint frees the tool id: no callback of ours is left anywhere.
"""

from __future__ import annotations

import sys
import threading
from types import CodeType, FrameType
from typing import Any

from .armed_watch import Watched

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

    def install(self, armed: Watched) -> None:
        monitoring: Any = sys.monitoring  # type: ignore[attr-defined,unused-ignore]
        events = monitoring.events
        with self._lock:
            if self._tool is None:
                self._tool = _take_tool_id(monitoring)
                monitoring.register_callback(self._tool, events.PY_START, self._py_start)
                monitoring.register_callback(self._tool, events.LINE, self._line)
            tool = self._tool
            self._armed = armed
            for code in self._watched:
                monitoring.set_local_events(tool, code, 0)
            self._watched = set()
            monitoring.set_events(tool, events.PY_START)
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
            monitoring.set_events(tool, 0)
            for code in self._watched:
                monitoring.set_local_events(tool, code, 0)
            self._watched = set()
            monitoring.register_callback(tool, monitoring.events.PY_START, None)
            monitoring.register_callback(tool, monitoring.events.LINE, None)
            monitoring.free_tool_id(tool)

    def active(self) -> bool:
        monitoring: Any = sys.monitoring  # type: ignore[attr-defined,unused-ignore]
        return self._tool is not None and monitoring.get_tool(self._tool) == TOOL_NAME

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
        armed.on_line(sys._getframe(1), line)
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
