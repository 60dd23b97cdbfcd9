"""The terminal debugger's breakpoints, numbered as pdb numbers them.

DAP's ``setBreakpoints`` replaces every breakpoint of one source file and
``setFunctionBreakpoints`` every function breakpoint, so the table keeps them all and builds
those requests' arguments; the responses' ids map a ``stopped`` event's ``hitBreakpointIds``
back to our numbers (for ``tbreak``). The cluster's breakpoints are in the table too, listed
with their kind, but never sent: the hub gives the attached process's pydevd the whole
breakpoint set beside ours, and follows it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..errors import CommandError
from ..protocol.paths import PathTranslator


@dataclass
class Breakpoint:
    number: int
    file: str | None  # None for a function breakpoint
    line: int | None
    function: str | None = None
    condition: str | None = None
    temporary: bool = False
    enabled: bool = True
    hidden: bool = False  # set by `until N`, not the user: never listed
    verified: bool = True
    dap_id: int | None = None
    # A cluster breakpoint (an IDE's, the web page's, `raydebug break`'s): the hub sets it in
    # this process's pydevd while we debug it, and only `raydebug break --remove` (or its
    # IDE) takes it away.
    cluster: bool = False
    hit_condition: str | None = None
    log_message: str | None = None

    def where(self) -> str:
        return f"{self.file}:{self.line}" if self.file else f"function {self.function}"


@dataclass
class BreakpointTable:
    _all: dict[int, Breakpoint] = field(default_factory=dict)
    _next_number: int = 1

    def add(self, file: str | None, line: int | None, function: str | None = None,
            condition: str | None = None, temporary: bool = False,
            hidden: bool = False) -> Breakpoint:
        number = 0 if hidden else self._next_number
        if not hidden:
            self._next_number += 1
        point = Breakpoint(number, file, line, function, condition, temporary, hidden=hidden)
        self._all[number] = point
        return point

    def show_cluster(self, listing: list[dict[str, Any]], remote_root: str | None) -> set[str]:
        """The hub's cluster breakpoints (``GET /api/breakpoints``) in place of those listed
        so far, as this process names their files (under its ``remote_root`` where the
        client that set them gave a local root), to list beside ours; returns their files."""
        for point in [p for p in self._all.values() if p.cluster]:
            self.remove(point)
        files = set()
        for entry in listing:
            path = entry.get("path")
            line = entry.get("line")
            if not isinstance(path, str) or not isinstance(line, int):
                continue
            local_root = entry.get("localRoot")
            if isinstance(local_root, str) and local_root and remote_root:
                path = PathTranslator(remote_root=remote_root,
                                      local_root=local_root).to_remote_path(path)
            point = self.add(path, line, condition=entry.get("condition") or None)
            point.cluster = True
            point.hit_condition = entry.get("hitCondition") or None
            point.log_message = entry.get("logMessage") or None
            files.add(path)
        return files

    def get(self, number: int) -> Breakpoint:
        try:
            return self._all[number]
        except KeyError:
            raise CommandError(f"no breakpoint number {number}") from None

    def remove(self, point: Breakpoint) -> None:
        self._all.pop(point.number, None)

    def at(self, file: str, line: int) -> list[Breakpoint]:
        return [p for p in self._all.values() if p.file == file and p.line == line]

    def visible(self) -> list[Breakpoint]:
        return sorted((p for p in self._all.values() if not p.hidden), key=lambda p: p.number)

    def any_enabled(self) -> bool:
        return any(p.enabled for p in self._all.values())

    def lines_in(self, file: str) -> set[int]:
        return {p.line for p in self._all.values()
                if p.file == file and p.line is not None and not p.hidden}

    def files(self) -> set[str]:
        return {p.file for p in self._all.values() if p.file}

    def source_arguments(self, file: str) -> tuple[dict[str, Any], list[Breakpoint]]:
        """``setBreakpoints`` arguments for ``file``, and the breakpoints in their order: our
        own enabled ones (the hub adds the cluster's)."""
        points = [p for p in self._all.values()
                  if p.file == file and p.enabled and not p.cluster]
        return {"source": {"path": file},
                "breakpoints": [_dap_breakpoint(p, line=p.line) for p in points]}, points

    def function_arguments(self) -> tuple[dict[str, Any], list[Breakpoint]]:
        points = [p for p in self._all.values() if p.function and p.enabled]
        return {"breakpoints": [_dap_breakpoint(p, name=p.function) for p in points]}, points

    def record_answer(self, points: list[Breakpoint], answer: list[dict[str, Any]]) -> None:
        """Remember what the debuggee made of each breakpoint (same order as sent)."""
        for point, dap in zip(points, answer, strict=False):
            point.dap_id = dap.get("id")
            point.verified = bool(dap.get("verified", True))
            if point.file and isinstance(dap.get("line"), int):
                point.line = dap["line"]  # pydevd moves a breakpoint to a line with code

    def hit(self, dap_ids: list[int]) -> list[Breakpoint]:
        return [p for p in self._all.values() if p.dap_id is not None and p.dap_id in dap_ids]


def _dap_breakpoint(point: Breakpoint, **where: Any) -> dict[str, Any]:
    dap: dict[str, Any] = dict(where)
    if point.condition:
        dap["condition"] = point.condition
    if point.hit_condition:
        dap["hitCondition"] = point.hit_condition
    if point.log_message:
        dap["logMessage"] = point.log_message
    return dap
