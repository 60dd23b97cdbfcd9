"""The cluster's breakpoint set: what the IDEs set on their cluster sessions, merged.

Theory of operation. Each cluster (parent) session, and ``raydebug break`` through HTTP, is a
*client* of this set, named by a key. A client's ``setBreakpoints`` replaces its breakpoints
in that one source (DAP: "the full list of breakpoints of a source"); its
``setFunctionBreakpoints`` and ``setExceptionBreakpoints`` replace its function breakpoints
and exception filters. The set sent to processes (:meth:`ClusterBreakpointSet.wire`, the form
``raydebug.agent.armed.breakpoints.BreakpointSet`` reads) is every client's, side by side;
a client that leaves takes its breakpoints with it.

Verification (DAP "Breakpoint" ``verified``): a breakpoint is answered unverified, with a
message, until some process reports code of its file loaded (``BreakpointsLoaded``); then
:meth:`ClusterBreakpointSet.loaded` returns the breakpoints to announce, per client, as DAP
``breakpoint`` events with reason ``changed``. Ids are unique for the hub's life.

Pure: no I/O, no asyncio; the hub sends what this returns.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import Any

UNVERIFIED = "not loaded in any process yet: verified when a process loads its file"
# The exception filters the hub offers (DAP ExceptionBreakpointsFilter ids, as debugpy's).
EXCEPTION_FILTERS = ("raised", "uncaught")


@dataclass
class _Source:
    path: str
    local_root: str | None
    breakpoints: list[dict[str, Any]]  # DAP SourceBreakpoint, as the client sent them
    ids: list[int]


@dataclass
class _Client:
    sources: dict[str, _Source] = field(default_factory=dict)
    functions: list[dict[str, Any]] = field(default_factory=list)
    function_ids: list[int] = field(default_factory=list)
    exceptions: set[str] = field(default_factory=set)


class ClusterBreakpointSet:
    """See the module docstring. ``generation`` counts the changes of :meth:`wire`."""

    def __init__(self) -> None:
        self._clients: dict[str, _Client] = {}
        self._loaded: set[str] = set()  # client paths some process has loaded
        self._ids = itertools.count(1)
        self.generation = 0

    # -- what clients set ---------------------------------------------------------------------

    def set_breakpoints(self, client: str, arguments: dict[str, Any],
                        local_root: str | None = None) -> dict[str, Any]:
        """A ``setBreakpoints`` request's arguments; returns the response body.

        Raises ValueError for arguments without a source path or with a line that is not an
        integer (the caller fails the request with that message)."""
        source = arguments.get("source") or {}
        path = source.get("path") if isinstance(source, dict) else None
        if not isinstance(path, str) or not path:
            raise ValueError("setBreakpoints needs source.path (the cluster session sets "
                             "breakpoints by file)")
        wanted = arguments.get("breakpoints")
        if wanted is None:  # the deprecated form: lines only
            wanted = [{"line": line} for line in arguments.get("lines") or []]
        if not isinstance(wanted, list) or not all(
                isinstance(b, dict) and isinstance(b.get("line"), int)
                and not isinstance(b.get("line"), bool) for b in wanted):
            raise ValueError("setBreakpoints: each breakpoint needs an integer line")
        entry = self._clients.setdefault(client, _Client())
        old = entry.sources.get(path)
        ids = []
        for spec in wanted:  # an unchanged breakpoint keeps its id (VS Code matches on it)
            same = [i for b, i in zip(old.breakpoints, old.ids, strict=True)
                    if b == spec] if old else []
            ids.append(same[0] if same else next(self._ids))
        if wanted:
            entry.sources[path] = _Source(path, local_root, [dict(b) for b in wanted], ids)
        else:
            entry.sources.pop(path, None)
        self.generation += 1
        return {"breakpoints": [self._view(path, spec, id_)
                                for spec, id_ in zip(wanted, ids, strict=True)]}

    def set_function_breakpoints(self, client: str, arguments: dict[str, Any]
                                 ) -> dict[str, Any]:
        wanted = [b for b in arguments.get("breakpoints") or []
                  if isinstance(b, dict) and isinstance(b.get("name"), str) and b["name"]]
        entry = self._clients.setdefault(client, _Client())
        entry.functions = wanted
        entry.function_ids = [next(self._ids) for _ in wanted]
        self.generation += 1
        # Function breakpoints are looked up by name as code starts: nothing to verify.
        return {"breakpoints": [{"id": id_, "verified": True}
                                for id_ in entry.function_ids]}

    def set_exception_breakpoints(self, client: str, arguments: dict[str, Any]
                                  ) -> dict[str, Any]:
        filters = {f for f in arguments.get("filters") or [] if f in EXCEPTION_FILTERS}
        entry = self._clients.setdefault(client, _Client())
        entry.exceptions = filters
        self.generation += 1
        return {}

    def remove_line(self, clients: tuple[str, ...], path: str, line: int
                    ) -> list[dict[str, Any]]:
        """Remove the line breakpoints at ``path``:``line`` that ``clients`` set (the others'
        stay: an IDE owns its own); returns them as :meth:`listing` entries, ``[]`` when
        none was there."""
        removed = [entry for entry in self.listing() if entry["client"] in clients
                   and entry["path"] == path and entry["line"] == line]
        for key in {entry["client"] for entry in removed}:
            sources = self._clients[key].sources
            kept = [(spec, id_) for spec, id_ in zip(sources[path].breakpoints,
                                                     sources[path].ids, strict=True)
                    if spec["line"] != line]
            if kept:
                sources[path].breakpoints = [spec for spec, _ in kept]
                sources[path].ids = [id_ for _, id_ in kept]
            else:
                del sources[path]
        if removed:
            self.generation += 1
        return removed

    def clear(self, client: str) -> bool:
        """Forget every breakpoint of ``client`` (it left); True if the set changed."""
        entry = self._clients.pop(client, None)
        if entry is None:
            return False
        changed = bool(entry.sources or entry.functions or entry.exceptions)
        if changed:
            self.generation += 1
        return changed

    # -- what processes say ---------------------------------------------------------------------

    def loaded(self, paths: list[str]) -> dict[str, list[dict[str, Any]]]:
        """Some process has code of these client ``paths`` loaded: the breakpoints now
        verified, by client (to send as ``breakpoint`` events, reason ``changed``)."""
        new = set(paths) - self._loaded
        self._loaded |= new
        changed: dict[str, list[dict[str, Any]]] = {}
        for key, entry in self._clients.items():
            for path in new & set(entry.sources):
                source = entry.sources[path]
                changed.setdefault(key, []).extend(
                    self._view(path, spec, id_)
                    for spec, id_ in zip(source.breakpoints, source.ids, strict=True))
        return changed

    # -- what processes get ---------------------------------------------------------------------

    @property
    def empty(self) -> bool:
        return not any(e.sources or e.functions or e.exceptions
                       for e in self._clients.values())

    def wire(self) -> dict[str, Any]:
        """The merged set, in ``ArmBreakpoints.breakpoints`` form."""
        sources = []
        functions: list[dict[str, Any]] = []
        exceptions: set[str] = set()
        for entry in self._clients.values():
            for source in entry.sources.values():
                sources.append({"path": source.path, "localRoot": source.local_root,
                                "breakpoints": [_source_breakpoint(b)
                                                for b in source.breakpoints]})
            functions.extend({"name": b["name"]} for b in entry.functions)
            exceptions |= entry.exceptions
        return {"sources": sources, "functions": functions, "exceptions": sorted(exceptions)}

    def listing(self) -> list[dict[str, Any]]:
        """Every line breakpoint, for ``raydebug break --list`` (``GET /api/breakpoints``)."""
        return [{"id": id_, "path": path, "line": spec["line"],
                 "condition": spec.get("condition") or "",
                 "hitCondition": spec.get("hitCondition") or "",
                 "logMessage": spec.get("logMessage") or "",
                 "verified": path in self._loaded, "client": key,
                 "localRoot": source.local_root}
                for key, entry in self._clients.items()
                for path, source in entry.sources.items()
                for spec, id_ in zip(source.breakpoints, source.ids, strict=True)]

    def sources_of(self, client: str) -> dict[str, list[dict[str, Any]]]:
        """``client``'s breakpoints by path (to add one to a file without losing the rest)."""
        entry = self._clients.get(client)
        return {path: [dict(b) for b in source.breakpoints]
                for path, source in (entry.sources.items() if entry else ())}

    def _view(self, path: str, spec: dict[str, Any], id_: int) -> dict[str, Any]:
        view: dict[str, Any] = {"id": id_, "verified": path in self._loaded,
                                "line": spec["line"], "source": {"path": path}}
        if not view["verified"]:
            view["message"] = UNVERIFIED
        return view


def _source_breakpoint(spec: dict[str, Any]) -> dict[str, Any]:
    return {"line": spec["line"], "condition": spec.get("condition") or "",
            "hitCondition": spec.get("hitCondition") or "",
            "logMessage": spec.get("logMessage") or ""}
