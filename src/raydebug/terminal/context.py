"""What every terminal debugger command works on, and the few things they all do.

:class:`DebuggerContext` holds one attached session's state as the prompt sees it: the
debuggee (:class:`~.remote.Debuggee`), the hub's session record, the current thread, its
stack and selected frame, the breakpoint table, the displays and the sources read so far.
Its helpers are the ones several kinds of command need: showing a stop (after a step, a
``thread N``, a frame change), evaluating in a frame, reading a frame's source, sending a
file's breakpoints and detaching. The commands themselves live by idea in
:mod:`.inspect_commands`, :mod:`.breakpoint_commands`, :mod:`.running` and
:mod:`.session_commands`; :class:`~.debugger.TerminalDebugger` puts them together.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ..errors import CommandError, DapRequestError, RaydebugError
from ..shell_command import raydebug_command
from . import render, sources
from .breakpoints import Breakpoint, BreakpointTable
from .commands import Command
from .remote import Debuggee, Stop


def _nothing_typed() -> str | None:
    return None


def _no_session(thread_name: str) -> dict[str, Any] | None:
    return None


@dataclass
class DebuggerContext:
    remote: Debuggee
    session: dict[str, Any]
    write: Callable[[str], None]  # prints one line
    colour: bool = False
    confirm: Callable[[str], bool] = lambda question: False
    # A line typed while the debuggee runs (running.EOF at Ctrl-D), or None.
    poll_input: Callable[[], str | None] = _nothing_typed
    # The hub's session of a thread of this process, by the thread's name.
    find_session: Callable[[str], dict[str, Any] | None] = _no_session
    width: Callable[[], int] = lambda: 80  # the terminal's columns, now
    # The hub's cluster breakpoints now (GET /api/breakpoints; [] when it cannot say), to list.
    cluster_breakpoints: Callable[[], list[dict[str, Any]]] = list
    breakpoints: BreakpointTable = field(default_factory=BreakpointTable)
    thread_id: int = 0
    frames: list[dict[str, Any]] = field(default_factory=list)
    frame_index: int = 0
    displays: dict[str, str | None] = field(default_factory=dict)
    _sources: dict[str, list[str] | None] = field(default_factory=dict)
    _coloured: dict[str, list[str]] = field(default_factory=dict)
    _list_next: int | None = None  # where a bare `list` continues
    _last_command: Command | None = None
    _stops_announced: int = 0
    _others_stopped: set[int] = field(default_factory=set)  # at the last prompt
    # The session's thread was blocked in C when we attached: stops counted then (see
    # session_commands.show_return_from_c); None once it returned, or when it was not.
    _blocked_at_count: int | None = None
    # The session's own function, as far as the stacks seen tell (running._session_function).
    _session_depth: int | None = None
    _session_frame_name: str = ""
    # A session of another call took over this thread (running._adopt_new_session): its
    # header goes before its stop.
    _new_call: dict[str, Any] | None = None
    # After a resume's stop: the session resumed, its function and the session ends seen
    # then; one that comes with the stop's stack is said before its lines (running).
    _returned_from: tuple[str, str, int] | None = None

    # -- the current frame ------------------------------------------------------------------

    @property
    def frame(self) -> dict[str, Any]:
        if not self.frames:
            raise CommandError(self._no_frames(self.thread_id))
        return self.frames[self.frame_index]

    def _no_frames(self, thread_id: int) -> str:
        """Why ``thread_id`` has no frame to show: not stopped, or stopped where only library
        code runs (a thread of Ray's, or one that runs ``Event.wait`` itself), which the
        stack leaves out as it leaves out the library frames above the user's."""
        if not self.remote.stops.is_stopped(thread_id):
            return "no frame is selected (the thread is not stopped)"
        if self.session.get("worker_id") and not self.session.get("task_name"):
            # A Ray worker or actor between tasks: nothing of the user's runs to look at.
            return (f"thread {thread_id} shows no frames: this Ray worker runs no task now "
                    "(it waits in Ray's own code); pause it while a task or method runs, or "
                    f"stop in one with `{raydebug_command()} break FILE:LINE`; `threads` lists "
                    "the others")
        return (f"thread {thread_id} shows no frames: it is stopped in library code only; "
                "`threads` lists the others")

    def _refuse_frameless(self, thread_id: int) -> None:
        """Raises :class:`CommandError` (why) when the stopped ``thread_id`` has no frame to
        show: ``thread N`` then stays on the current thread."""
        if not self._shows_frames(thread_id):
            raise CommandError(self._no_frames(thread_id))

    def _shows_frames(self, thread_id: int) -> bool:
        """Whether the stopped ``thread_id`` has a frame to show (one of the user's code:
        the stack leaves out library frames, all of a thread of Ray's)."""
        return bool(self.remote.request("stackTrace", {"threadId": thread_id})["stackFrames"])

    def _before_stop_lines(self) -> None:
        """What goes before a stop's lines, once its stack has come (running's header of a
        new call)."""

    def _refresh_stack(self) -> None:
        self.frames = self.remote.request("stackTrace", {"threadId": self.thread_id})[
            "stackFrames"]
        self.frame_index = 0

    # -- showing a stop ---------------------------------------------------------------------

    def _on_stop(self, stop: Stop) -> None:
        self.thread_id = stop.thread_id
        for point in self._breakpoints_hit(stop):
            if point.temporary or point.hidden:
                self.breakpoints.remove(point)
                self._send_breakpoints(point.file)
                if not point.hidden:
                    self.write(f"Deleted breakpoint {point.number} at {point.where()}")
        self._show_stop()

    def _breakpoints_hit(self, stop: Stop) -> list[Breakpoint]:
        """Our breakpoints that ``stop`` hit: by its ids, else by where it stopped (pydevd
        renumbers a file's breakpoints each time the hub adds the breakpoint set's to them,
        so a stop may carry ids we were never told)."""
        hit = self.breakpoints.hit(list(stop.hit_ids))
        if hit or stop.reason != "breakpoint":
            return hit
        self._refresh_stack()
        if not self.frames:
            return []
        top = self.frames[0]
        return [point for point in self.breakpoints.at(sources.frame_path(top),
                                                       int(top.get("line", 0)))
                if not point.cluster]

    def _show_stop(self, context: int = 0) -> None:
        self._refresh_stack()
        self._before_stop_lines()
        self._list_next = None
        if not self.frames:
            self.write(render.error(self._no_frames(self.thread_id)))
            return
        frame = self.frames[0]
        for line in render.stop_lines(frame, None if context else self._source_line(frame)):
            self.write(line)
        if context:
            self._list_around(frame, context)
            self._list_next = None  # a first `list` still shows the lines around the stop
        self._show_displays()

    def _list_around(self, frame: dict[str, Any], context: int) -> None:
        line = int(frame.get("line", 0))
        if self._source(frame) is not None:
            self._write_listing(frame, line - context, line + context)

    def _write_listing(self, frame: dict[str, Any], first: int, last: int) -> None:
        path = sources.frame_path(frame)
        lines = self._source(frame) or []
        current = int(frame.get("line", 0))
        for text in render.listing(lines, first, last, current,
                                   self.breakpoints.lines_in(path),
                                   self._coloured_source(path, lines)):
            self.write(text)
        self._list_next = last + 1

    def _show_displays(self) -> None:
        for expression, old in list(self.displays.items()):
            value = self._display_value(expression)
            if value != old:
                self.displays[expression] = value
                self.write(f"display {expression}: {value}  [old: {old}]")

    def _display_value(self, expression: str) -> str:
        try:
            return self._evaluate(expression, "repl")
        except DapRequestError as error:
            return render.evaluate_error(str(error))

    # -- evaluating and sources -------------------------------------------------------------

    def _evaluate(self, expression: str, context: str) -> str:
        return self._evaluate_in(self.frame, expression, context)

    def _evaluate_in(self, frame: dict[str, Any], expression: str, context: str) -> str:
        body = self.remote.request("evaluate", {"expression": expression, "context": context,
                                                "frameId": frame["id"]})
        return str(body.get("result", ""))

    def _source(self, frame: dict[str, Any]) -> list[str] | None:
        """The lines of a frame's file as the debuggee has them (cached)."""
        path = sources.frame_path(frame)
        if path not in self._sources:
            self._sources[path] = self._fetch_source(frame, path)
        return self._sources[path]

    def _fetch_source(self, frame: dict[str, Any], path: str) -> list[str] | None:
        """The debuggee's text of ``path``: through DAP's ``source`` when the frame's source
        has a ``sourceReference`` (DAP: then the client must read it so; a snapshot's
        captured text, pydevd's for a file the client may not have), else by evaluating."""
        reference = (frame.get("source") or {}).get("sourceReference")
        if reference:
            try:
                body = self.remote.request("source", {"sourceReference": reference,
                                                      "source": frame["source"]})
                return str(body.get("content", "")).splitlines(keepends=True) or None
            except DapRequestError:
                pass  # read it as any other file
        try:
            answer = self._evaluate_in(frame, sources.fetch_expression(path), "clipboard")
        except (DapRequestError, CommandError):
            return None
        return sources.lines_from_answer(answer)

    def _coloured_source(self, path: str, lines: list[str]) -> list[str] | None:
        if not self.colour:
            return None
        if path not in self._coloured:
            self._coloured[path] = render.highlight_lines("".join(lines))
        coloured = self._coloured[path]
        return coloured if len(coloured) == len(lines) else None

    def _source_line(self, frame: dict[str, Any]) -> str | None:
        lines = self._source(frame)
        line = int(frame.get("line", 0))
        if lines is None or not 0 < line <= len(lines):
            return None
        return lines[line - 1]

    def _take_session_of(self, thread_name: str) -> None:
        """The prompt moved to the thread called ``thread_name``: its session, if the hub
        has one, is the one the prompt runs and ends from now on."""
        session = self.find_session(thread_name)
        if session is not None:
            self.session = session
            self._session_depth = None

    # -- breakpoints and leaving ------------------------------------------------------------

    def _send_breakpoints(self, file: str | None) -> None:
        if file is None:
            arguments, points = self.breakpoints.function_arguments()
            answer = self.remote.request("setFunctionBreakpoints", arguments)
        else:
            arguments, points = self.breakpoints.source_arguments(file)
            answer = self.remote.request("setBreakpoints", arguments)
        self.breakpoints.record_answer(points, answer.get("breakpoints") or [])

    def _detach(self, what: str | None) -> None:
        """Disconnect (pydevd resumes the process's threads); ``what`` is said, if given."""
        try:
            self.remote.request("disconnect", {"terminateDebuggee": False}, timeout=5.0)
        except (RaydebugError, TimeoutError):
            pass  # the process is gone already: nothing to detach from
        if what is not None:
            self.write(f"session {self.session.get('id')} {what}; the process runs on")
