"""The terminal debugger's breakpoint commands: ``break``, ``tbreak``, ``clear``,
``disable``, ``enable``, as pdb has them. Each changes the table (:mod:`.breakpoints`) and
sends the changed file's breakpoints (DAP ``setBreakpoints`` replaces all of a file's). The
cluster's breakpoints are listed but not ours to clear, disable or enable: the hub keeps them
in the process's pydevd, and ``raydebug break --remove`` removes them.
"""

from __future__ import annotations

from ..errors import CommandError
from . import commands, render, sources
from .breakpoints import Breakpoint
from .context import DebuggerContext


class BreakpointCommands(DebuggerContext):
    """Mixed into :class:`~.debugger.TerminalDebugger`."""

    def do_break(self, arg: str, temporary: bool = False) -> None:
        if not arg:  # the cluster's as they are now: `raydebug break` may have changed them
            self.breakpoints.show_cluster(self.cluster_breakpoints(),
                                          self.session.get("remote_root"))
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
                    if not point.cluster:
                        self.breakpoints.remove(point)
                for file in files:
                    self._send_breakpoints(file)
                self._send_breakpoints(None)
            return
        if ":" in arg and not arg.split()[0].isdigit():
            location = commands.parse_location(arg)
            found = self.breakpoints.at(self._resolve_file(location.file), location.line or 0)
            if not found:
                raise CommandError(f"there is no breakpoint at {arg}")
            points = [p for p in found if not p.cluster] or [_refuse_cluster(found[0])]
        else:
            points = [_refuse_cluster(self.breakpoints.get(n))
                      for n in commands.parse_numbers(arg)]
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
            point = _refuse_cluster(self.breakpoints.get(number))
            point.enabled = enabled
            self._send_breakpoints(point.file)
            self.write(f"{'Enabled' if enabled else 'Disabled'} breakpoint {number}")

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


def _refuse_cluster(point: Breakpoint) -> Breakpoint:
    """``point``, unless it is the cluster's: raises CommandError saying how to remove it."""
    if point.cluster:
        raise CommandError(f"breakpoint {point.number} is the cluster's: the hub sets it in "
                           f"every process; `raydebug break --remove {point.where()}` removes "
                           "it (one set by an IDE, its IDE)")
    return point
