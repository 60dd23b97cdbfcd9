"""The terminal debugger's commands: pdb's behaviour, carried out with DAP requests.

One :class:`TerminalDebugger` serves one attached session. :meth:`execute` runs one input
line and says whether the session goes on; it never raises for the debuggee's errors (they
are printed as pdb prints them, ``*** NameError: ...``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ..client.dap import DapRequestError
from ..errors import RaydebugError
from . import commands, render, sources
from .breakpoints import BreakpointTable
from .commands import STATEMENT, Command, CommandError
from .remote import Remote, Stop
from .running import Outcome, RunningCommands

__all__ = ["Outcome", "TerminalDebugger"]

LIST_LINES = 11


def _nothing_typed() -> str | None:
    return None


def _no_session(thread_name: str) -> dict[str, Any] | None:
    return None


@dataclass
class TerminalDebugger(RunningCommands):
    remote: Remote
    session: dict[str, Any]
    write: Callable[[str], None]  # prints one line
    colour: bool = False
    confirm: Callable[[str], bool] = lambda question: False
    # A line typed while the debuggee runs (running.EOF at Ctrl-D), or None.
    poll_input: Callable[[], str | None] = _nothing_typed
    # The hub's session of a thread of this process, by the thread's name.
    find_session: Callable[[str], dict[str, Any] | None] = _no_session
    width: Callable[[], int] = lambda: 80  # the terminal's columns, now
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

    # -- stops ------------------------------------------------------------------------------

    def start(self) -> None:
        """Show the header and where the session is stopped (after attach)."""
        stop = self.remote.stops.last
        self._select_session_thread(stop)
        self._refresh_stack()
        line = int(self.frames[0].get("line", 0)) if self.frames else None
        for text in render.session_header(self.session, line):
            self.write(text)
        self._show_stop(context=2)
        self._stops_announced = self.remote.stops.count

    def announce_other_stops(self) -> None:
        """Before a prompt: say which other threads stopped meanwhile (their own
        breakpoint(), in a threaded actor; ``thread N`` switches to one), and which stopped
        ones ran on though we did not resume them."""
        stops = self.remote.stops
        stopped = set(stops.stopped_threads)
        ran_on = sorted(self._others_stopped - stopped)
        self._others_stopped = stopped - {self.thread_id}
        if ran_on:
            self.write(f"(thread {', '.join(map(str, ran_on))} ran on: resumed by something "
                       "other than this prompt)")
        if stops.count == self._stops_announced:
            return
        self._stops_announced = stops.count
        if self._others_stopped:
            self.write(f"(stopped too: thread {', '.join(map(str, sorted(self._others_stopped)))}"
                       "; `thread N` switches)")

    def _select_session_thread(self, stop: Stop | None) -> None:
        wanted = self.session.get("thread")
        threads = self.remote.request("threads")["threads"]
        by_name = [t["id"] for t in threads
                   if t.get("name") == wanted and self.remote.stops.is_stopped(t["id"])]
        if by_name:
            self.thread_id = by_name[0]
        elif stop is not None:
            self.thread_id = stop.thread_id

    def _on_stop(self, stop: Stop) -> None:
        self.thread_id = stop.thread_id
        for point in self.breakpoints.hit(list(stop.hit_ids)):
            if point.temporary or point.hidden:
                self.breakpoints.remove(point)
                self._send_breakpoints(point.file)
                if not point.hidden:
                    self.write(f"Deleted breakpoint {point.number} at {point.where()}")
        self._show_stop()

    def _show_stop(self, context: int = 0) -> None:
        self._refresh_stack()
        self._list_next = None
        if not self.frames:
            self.write(render.error("the stopped thread has no Python frames"))
            return
        frame = self.frames[0]
        for line in render.stop_lines(frame, None if context else self._source_line(frame)):
            self.write(line)
        if context:
            self._list_around(frame, context)
            self._list_next = None  # a first `list` still shows the lines around the stop
        self._show_displays()

    def _refresh_stack(self) -> None:
        self.frames = self.remote.request("stackTrace", {"threadId": self.thread_id})[
            "stackFrames"]
        self.frame_index = 0

    @property
    def frame(self) -> dict[str, Any]:
        if not self.frames:
            raise CommandError("no frame is selected (the thread is not stopped)")
        return self.frames[self.frame_index]

    # -- the command loop's entry -----------------------------------------------------------

    def execute(self, line: str) -> Outcome:
        """Run one input line (an empty line repeats the previous command, as in pdb)."""
        command = commands.parse(line)
        if command is None:
            command = self._last_command
            if command is None:
                return Outcome.STOPPED
        self._last_command = command if command.name not in (STATEMENT, "help") else None
        try:
            return self._dispatch(command)
        except CommandError as error:
            self.write(render.error(str(error)))
        except DapRequestError as error:
            self.write(render.evaluate_error(str(error)))
        except KeyboardInterrupt:  # during a slow request: the prompt comes back
            self.write("\n--KeyboardInterrupt--")
        except TimeoutError:
            self.write(render.error("the debuggee did not answer in time"))
        except RaydebugError as error:  # the connection broke: said once, below
            if self.remote.stops.ended is None:
                self.write(render.error(str(error)))
        if self.remote.stops.ended is not None:
            self.write(f"session {self.session.get('id')}: {self.remote.stops.ended}")
            return Outcome.ENDED
        return Outcome.STOPPED

    def _dispatch(self, command: Command) -> Outcome:
        handler = getattr(self, f"do_{command.name}" if command.name != STATEMENT
                          else "do_statement")
        result = handler(command.arg)
        return result if isinstance(result, Outcome) else Outcome.STOPPED

    # -- inspecting -------------------------------------------------------------------------

    def do_where(self, arg: str) -> None:
        for line in render.stack_lines(self.frames, self.frame_index, self._source_line):
            self.write(line)

    def do_up(self, arg: str) -> None:
        self._select_frame(self.frame_index + commands.parse_count(arg), "Oldest frame")

    def do_down(self, arg: str) -> None:
        self._select_frame(self.frame_index - commands.parse_count(arg), "Newest frame")

    def do_frame(self, arg: str) -> None:
        if not arg:
            raise CommandError("give a frame number (see where)")
        # `where` numbers frames oldest first, as pdb 3.12 does.
        self._select_frame(len(self.frames) - 1 - commands.parse_count(arg), "No such frame")

    def _select_frame(self, index: int, limit: str) -> None:
        if not 0 <= index < len(self.frames):
            raise CommandError(limit)
        self.frame_index = index
        self._list_next = None
        for line in render.stop_lines(self.frame, self._source_line(self.frame)):
            self.write(line)

    def do_list(self, arg: str) -> None:
        frame = self.frame
        lines = self._source(frame)
        if lines is None:
            raise CommandError("source not available")
        current = int(frame.get("line", 0))
        if arg == ".":
            first = max(1, current - 5)
        elif arg:
            parts = [p.strip() for p in arg.split(",")]
            first = commands.parse_count(parts[0])
            if len(parts) > 1:
                last = commands.parse_count(parts[1])
                last = first + last if last < first else last  # pdb: `l 10, 3` = 3 lines
                self._write_listing(frame, first, last)
                return
            first = max(1, first - 5)
        elif self._list_next is not None:
            first = self._list_next
        else:
            first = max(1, current - 5)
        if first > len(lines):
            raise CommandError("end of file")
        self._write_listing(frame, first, first + LIST_LINES - 1)

    def do_longlist(self, arg: str) -> None:
        frame = self.frame
        lines = self._source(frame)
        if lines is None:
            raise CommandError("source not available")
        first, last = sources.function_span("".join(lines), int(frame.get("line", 0)),
                                    str(frame.get("name", "")))
        self._write_listing(frame, first, last)

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

    def do_p(self, arg: str) -> None:
        if not arg:
            raise CommandError("give an expression")
        self.write(self._evaluate(arg, "repl"))

    def do_pp(self, arg: str) -> None:
        if not arg:
            raise CommandError("give an expression")
        text = self._evaluate(f"__import__('pprint').pformat(({arg}))", "clipboard")
        for line in sources.literal(text).splitlines():
            self.write(line)

    def do_statement(self, arg: str) -> None:
        """A Python statement or expression, run in the current frame (pdb's `!`)."""
        result = self._evaluate(arg, "repl")
        if result:
            self.write(result)

    def _evaluate(self, expression: str, context: str) -> str:
        return self._evaluate_in(self.frame, expression, context)

    def do_locals(self, arg: str) -> None:
        for name, value in self._locals():
            self.write(f"{name} = {value}")

    def do_args(self, arg: str) -> None:
        frame = self.frame
        lines = self._source(frame)
        names = sources.function_arguments("".join(lines or []), int(frame.get("line", 0)),
                                   str(frame.get("name", "")))
        values = dict(self._locals())
        for name in names:
            if name in values:
                self.write(f"{name} = {values[name]}")

    def _locals(self) -> list[tuple[str, str]]:
        scopes = self.remote.request("scopes", {"frameId": self.frame["id"]})["scopes"]
        if not scopes:
            return []
        variables = self.remote.request(
            "variables", {"variablesReference": scopes[0]["variablesReference"]})["variables"]
        return [(v["name"], v["value"]) for v in variables
                if not v["name"].startswith("(") and v.get("presentationHint", {}).get(
                    "kind") != "virtual"]

    def do_display(self, arg: str) -> None:
        if not arg:
            for expression, value in self.displays.items():
                self.write(f"{expression}: {value}")
            return
        value = self._display_value(arg)
        self.displays[arg] = value
        self.write(f"display {arg}: {value}")

    def do_undisplay(self, arg: str) -> None:
        if not arg:
            self.displays.clear()
        elif arg in self.displays:
            del self.displays[arg]
        else:
            raise CommandError(f"not displaying {arg}")

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

    def do_threads(self, arg: str) -> None:
        threads = self.remote.request("threads")["threads"]
        stopped = {t["id"] for t in threads if self.remote.stops.is_stopped(t["id"])}
        for line in render.threads_lines(threads, self.thread_id, stopped):
            self.write(line)

    def do_thread(self, arg: str) -> None:
        wanted = commands.parse_count(arg, default=-1)
        known = {t["id"] for t in self.remote.request("threads")["threads"]}
        if wanted not in known or not self.remote.stops.is_stopped(wanted):
            raise CommandError(f"thread {wanted} is not stopped (see threads)")
        self.thread_id = wanted
        self._show_stop()

    def do_exceptions(self, arg: str) -> None:
        last = self.remote.stops.last
        on_exception = last is not None and last.thread_id == self.thread_id and \
            last.reason == "exception"
        if not on_exception:  # pydevd answers garbage (and logs a traceback) otherwise
            raise CommandError("this thread did not stop on an exception")
        info = self.remote.request("exceptionInfo", {"threadId": self.thread_id})
        for line in render.exception_lines(info):
            self.write(line)

    def do_help(self, arg: str) -> None:
        for line in commands.help_text(arg, self.width()).splitlines():
            self.write(line)

    # -- breakpoints ------------------------------------------------------------------------

    def do_break(self, arg: str, temporary: bool = False) -> None:
        if not arg:
            for line in render.breakpoint_table(self.breakpoints.visible()):
                self.write(line)
            return
        location = commands.parse_location(arg)
        if location.function:
            point = self.breakpoints.add(None, None, location.function, location.condition,
                                         temporary)
        else:
            file = self._resolve_file(location.file)
            self._refuse_blank_line(file, location.line or 0)
            point = self.breakpoints.add(file, location.line, None, location.condition,
                                         temporary)
        self._send_breakpoints(point.file)
        self.write(f"{'Temporary b' if temporary else 'B'}reakpoint {point.number} at "
                   f"{point.where()}")
        if location.line is not None and point.line != location.line:
            self.write(f"(line {location.line} has no code: the debuggee moved the "
                       f"breakpoint to line {point.line})")
        if not point.verified:
            self.write(render.error(f"breakpoint {point.number} not verified by the debuggee"))

    def _refuse_blank_line(self, file: str, line: int) -> None:
        """pdb's refusal: pydevd would move a breakpoint on a blank line or a comment to the
        line before, which may be another function's last line, or code that never runs."""
        frame = next((f for f in self.frames if sources.frame_path(f) == file), None)
        lines = self._source(frame) if frame is not None else None
        if lines is None:
            return
        if not 0 < line <= len(lines):
            raise CommandError(f"line {line} is past the end of {file} ({len(lines)} lines)")
        text = lines[line - 1].strip()
        if not text or text.startswith("#"):
            raise CommandError(f"Blank or comment: line {line} of {file} has no code")

    def do_tbreak(self, arg: str) -> None:
        if not arg:
            raise CommandError("give a location")
        self.do_break(arg, temporary=True)

    def do_clear(self, arg: str) -> None:
        if not arg:
            if self.confirm("Clear all breaks? "):
                files = self.breakpoints.files()
                for point in self.breakpoints.visible():
                    self.breakpoints.remove(point)
                for file in files:
                    self._send_breakpoints(file)
                self._send_breakpoints(None)
            return
        if ":" in arg and not arg.split()[0].isdigit():
            location = commands.parse_location(arg)
            points = self.breakpoints.at(self._resolve_file(location.file), location.line or 0)
            if not points:
                raise CommandError(f"there is no breakpoint at {arg}")
        else:
            points = [self.breakpoints.get(n) for n in commands.parse_numbers(arg)]
        for point in points:
            self.breakpoints.remove(point)
            self._send_breakpoints(point.file)
            self.write(f"Deleted breakpoint {point.number} at {point.where()}")

    def do_disable(self, arg: str) -> None:
        self._set_enabled(arg, False)

    def do_enable(self, arg: str) -> None:
        self._set_enabled(arg, True)

    def _set_enabled(self, arg: str, enabled: bool) -> None:
        if not arg:
            raise CommandError("give breakpoint numbers (see break)")
        for number in commands.parse_numbers(arg):
            point = self.breakpoints.get(number)
            point.enabled = enabled
            self._send_breakpoints(point.file)
            self.write(f"{'Enabled' if enabled else 'Disabled'} breakpoint {number}")

    def _send_breakpoints(self, file: str | None) -> None:
        if file is None:
            arguments, points = self.breakpoints.function_arguments()
            answer = self.remote.request("setFunctionBreakpoints", arguments)
        else:
            arguments, points = self.breakpoints.source_arguments(file)
            answer = self.remote.request("setBreakpoints", arguments)
        self.breakpoints.record_answer(points, answer.get("breakpoints") or [])

    def _resolve_file(self, given: str | None) -> str:
        """A breakpoint's file as the debuggee knows it: the current file, an absolute path,
        or the path of a file on the stack that ends with the name given."""
        if given is None:
            return sources.frame_path(self.frame)
        if given.startswith("/"):
            return given
        for frame in self.frames:
            path = sources.frame_path(frame)
            if path.endswith("/" + given) or path == given:
                return path
        raise CommandError(f"{given!r} is not a file on the stack: give its absolute path on "
                           "the worker's machine")

    # -- sources ----------------------------------------------------------------------------

    def _source(self, frame: dict[str, Any]) -> list[str] | None:
        """The lines of a frame's file as the debuggee has them (cached)."""
        path = sources.frame_path(frame)
        if path not in self._sources:
            self._sources[path] = self._fetch_source(frame, path)
        return self._sources[path]

    def _fetch_source(self, frame: dict[str, Any], path: str) -> list[str] | None:
        try:
            answer = self._evaluate_in(frame, sources.fetch_expression(path), "clipboard")
        except (DapRequestError, CommandError):
            return None
        return sources.lines_from_answer(answer)

    def _evaluate_in(self, frame: dict[str, Any], expression: str, context: str) -> str:
        body = self.remote.request("evaluate", {"expression": expression, "context": context,
                                                "frameId": frame["id"]})
        return str(body.get("result", ""))

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

    def completions(self, text: str) -> list[tuple[str, int, int]]:
        """DAP ``completions`` for ``text`` in the current frame: (label, start, length)."""
        if not self.frames:
            return []
        body = self.remote.request("completions", {"text": text, "column": len(text) + 1,
                                                   "frameId": self.frame["id"]}, timeout=2.0)
        return [(t["label"], int(t.get("start", 0)), int(t.get("length", 0)))
                for t in body.get("targets", [])]
