"""The terminal debugger's commands that look without running: the stack (``where``, ``up``,
``down``, ``frame``), the source (``list``, ``longlist``), values (``p``, ``pp``, a Python
statement, ``locals``, ``args``, ``display``, ``undisplay``), the exception (``exceptions``),
and name completion. Each is pdb's, carried out with DAP requests on the selected frame.
"""

from __future__ import annotations

from ..errors import CommandError
from . import commands, render, snapshot_rules, sources
from .context import DebuggerContext

LIST_LINES = 11


class InspectCommands(DebuggerContext):
    """Mixed into :class:`~.debugger.TerminalDebugger`."""

    # -- the stack --------------------------------------------------------------------------

    def do_where(self, arg: str) -> None:
        if not self.frames:
            raise CommandError(self._no_frames(self.thread_id))
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

    # -- the source -------------------------------------------------------------------------

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

    # -- values -----------------------------------------------------------------------------

    def do_p(self, arg: str) -> None:
        if not arg:
            raise CommandError("give an expression")
        # pydevd answers a None in the "repl" context with "" (no "None" typed back at a
        # console); pdb's p prints it, and a blank line read as nothing printed.
        self.write(self._evaluate(arg, "repl") or "None")

    def do_pp(self, arg: str) -> None:
        if not arg:
            raise CommandError("give an expression")
        if snapshot_rules.is_snapshot(self.session):  # no pprint to call: the capture's repr
            for line in snapshot_rules.pretty(self._evaluate(arg, "repl")):
                self.write(line)
            return
        text = self._evaluate(f"__import__('pprint').pformat(({arg}))", "clipboard")
        for line in sources.literal(text).splitlines():
            self.write(line)

    def do_statement(self, arg: str) -> None:
        """A Python statement or expression, run in the current frame (pdb's `!`)."""
        result = self._evaluate(arg, "repl")
        if result:
            self.write(result)

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

    # -- the exception, completion ----------------------------------------------------------

    def do_exceptions(self, arg: str) -> None:
        last = self.remote.stops.last
        on_exception = last is not None and last.thread_id == self.thread_id and \
            last.reason == "exception"
        if not on_exception:  # pydevd answers garbage (and logs a traceback) otherwise
            raise CommandError("this thread did not stop on an exception")
        info = self.remote.request("exceptionInfo", {"threadId": self.thread_id})
        for line in render.exception_lines(info):
            self.write(line)

    def completions(self, text: str) -> list[tuple[str, int, int]]:
        """DAP ``completions`` for ``text`` in the current frame: (label, start, length)."""
        if not self.frames:
            return []
        body = self.remote.request("completions", {"text": text, "column": len(text) + 1,
                                                   "frameId": self.frame["id"]}, timeout=2.0)
        return [(t["label"], int(t.get("start", 0)), int(t.get("length", 0)))
                for t in body.get("targets", [])]
