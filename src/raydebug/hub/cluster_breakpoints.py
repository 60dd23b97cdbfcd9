"""The cluster's breakpoint set: what the IDEs set on their cluster sessions, merged.

Theory of operation. Each cluster (parent) session, ``raydebug break`` and the web page
(through HTTP, :data:`TERMINAL` and :data:`WEB_PAGE`) is a *client* of this set, named by a
key. A client's ``setBreakpoints`` replaces its breakpoints in that one source (DAP: "the
full list of breakpoints of a source"); its ``setFunctionBreakpoints`` and
``setExceptionBreakpoints`` replace its function breakpoints and exception filters. The set
sent to processes (:meth:`ClusterBreakpointSet.wire`, the form
``raydebug.agent.armed.breakpoints.BreakpointSet`` reads) is every client's, side by side; a
client that leaves takes its breakpoints with it.

Verification (DAP "Breakpoint" ``verified``): a breakpoint is answered unverified, with a
message, until some process reports code of its file loaded (``BreakpointsLoaded``); then
:meth:`ClusterBreakpointSet.loaded` returns the breakpoints to announce, per client, as DAP
``breakpoint`` events with reason ``changed``. Ids are unique for the hub's life.

What an attached DAP session's debugger gets (:class:`DapSessionBreakpoints`). While a
client debugs a process its arming stands down and pydevd's breakpoints are the ones that
stop it, so the pydevd of each attached DAP session (a plain client's, ``raydebug attach``'s,
the web page's, a child session) holds this whole set too, whoever set each breakpoint,
beside its own client's: per file one ``setBreakpoints`` with the client's lines and every
set line the client has none on (paths as that process names them; pydevd keeps one
breakpoint per line), the function breakpoints and the exception filters likewise.
:meth:`DapSessionBreakpoints.bring_up_to` returns the requests that take one pydevd from
what it has to that (a file left with no breakpoints is sent an empty list).

Pure: no I/O, no asyncio; the hub sends what this returns.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field, replace
from typing import Any

from ..protocol import Request
from ..protocol.paths import PathTranslator
from ..snapshots.format import SNAPSHOT_POINT_MESSAGE

UNVERIFIED = "not loaded in any process yet: verified when a process loads its file"
# The exception filters the hub offers (DAP ExceptionBreakpointsFilter ids, as debugpy's).
EXCEPTION_FILTERS = ("raised", "uncaught")
TERMINAL = "terminal"  # the client that `raydebug break` speaks for
WEB_PAGE = "web page"  # and the one the web page's gutter speaks for


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

    def edit_over_http(self, body: Any) -> tuple[dict[str, Any], bool]:
        """``POST /api/breakpoints``'s body (see ``ClusterSessions.set_from_terminal``):
        the answer (every line breakpoint, and what was ``set`` or ``removed``) and whether
        the set changed. Raises ValueError for a body of no known form."""
        if not isinstance(body, dict):
            raise ValueError('the body must be {"path": FILE, "line": N, ...}, '
                             '{"remove": {"path": FILE, "line": N}} or {"clear": true}')
        if body.get("clear") is True:
            cleared = [self.clear(owner) for owner in (TERMINAL, WEB_PAGE)]
            return {"breakpoints": self.listing()}, any(cleared)
        if isinstance(body.get("source"), dict):
            answer = self.set_breakpoints(WEB_PAGE, body)
            return {"breakpoints": self.listing(), "set": answer.get("breakpoints", [])}, True
        if "remove" in body:
            removed = self.remove_line((TERMINAL, WEB_PAGE), *_path_and_line(body["remove"]))
            return {"breakpoints": self.listing(), "removed": removed}, bool(removed)
        path, line = _path_and_line(body)
        spec = {"line": line, **{key: body[key] for key in ("condition", "hitCondition",
                                                             "logMessage")
                                 if isinstance(body.get(key), str) and body[key]}}
        kept = [b for b in self.sources_of(TERMINAL).get(path, []) if b["line"] != line]
        root = body.get("localRoot")
        self.set_breakpoints(TERMINAL, {"source": {"path": path}, "breakpoints": [*kept, spec]},
                             root if isinstance(root, str) and root else None)
        return {"breakpoints": self.listing()}, True

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

    def sources(self) -> list[_Source]:
        """Every client's sources, in the order :meth:`wire` lists them."""
        return [source for entry in self._clients.values() for source in entry.sources.values()]

    def functions(self) -> list[dict[str, Any]]:
        """Every client's function breakpoints (DAP FunctionBreakpoint), one per name."""
        by_name = {b["name"]: dict(b) for entry in self._clients.values()
                   for b in entry.functions}
        return list(by_name.values())

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


def _path_and_line(where: Any) -> tuple[str, int]:
    """``{"path": "/abs/job.py", "line": 12}`` -> its two fields; raises ValueError."""
    path, line = (where.get("path"), where.get("line")) if isinstance(where, dict) else (0, 0)
    if not isinstance(path, str) or not path.startswith("/") \
            or not isinstance(line, int) or isinstance(line, bool) or line < 1:
        raise ValueError("a breakpoint needs an absolute path and a line number >= 1")
    return path, line


def _source_breakpoint(spec: dict[str, Any]) -> dict[str, Any]:
    return {"line": spec["line"], "condition": spec.get("condition") or "",
            "hitCondition": spec.get("hitCondition") or "",
            "logMessage": spec.get("logMessage") or ""}



@dataclass(frozen=True)
class DebuggerBreakpoints:
    """Breakpoints as one process's debugger takes them: DAP request arguments, by kind."""

    sources: dict[str, list[dict[str, Any]]]  # the process's path -> DAP SourceBreakpoints
    functions: list[dict[str, Any]] = field(default_factory=list)  # DAP FunctionBreakpoints
    exceptions: list[str] = field(default_factory=list)  # exception filter ids

    @classmethod
    def of(cls, cluster: ClusterBreakpointSet, remote_root: str | None) -> DebuggerBreakpoints:
        """``cluster``'s breakpoints, every client's, for a process whose code lives in
        ``remote_root`` (each source's path moved there from its client's ``localRoot``),
        but its snapshot points (logpoints ``{snapshot}``: the process's arm takes them)."""
        sources: dict[str, list[dict[str, Any]]] = {}
        for source in cluster.sources():
            paths = PathTranslator.for_attach({"raydebug": {"localRoot": source.local_root}},
                                              remote_root)
            path = paths.to_remote_path(source.path) if paths else source.path
            # A snapshot point is the process's arm's to take, a client attached or not;
            # pydevd would log its message, evaluating ``snapshot`` as an expression.
            sources.setdefault(path, []).extend(
                dict(b) for b in source.breakpoints
                if str(b.get("logMessage") or "").strip() != SNAPSHOT_POINT_MESSAGE)
        return cls(sources, cluster.functions(), cluster.wire()["exceptions"])

    def plus(self, other: DebuggerBreakpoints) -> DebuggerBreakpoints:
        """These, and those of ``other`` on a line, function or filter these do not have."""
        sources = {path: [*self.sources.get(path, []),
                          *[b for b in other.sources.get(path, [])
                            if b["line"] not in {mine["line"]
                                                 for mine in self.sources.get(path, [])}]]
                   for path in {**self.sources, **other.sources}}
        names = {b["name"] for b in self.functions}
        return DebuggerBreakpoints(
            sources, [*self.functions, *[b for b in other.functions if b["name"] not in names]],
            [*self.exceptions, *[f for f in other.exceptions if f not in self.exceptions]])

    def with_request(self, request: Request) -> DebuggerBreakpoints:
        """These, after a ``setBreakpoints``, ``setFunctionBreakpoints`` or
        ``setExceptionBreakpoints`` request (it replaces that file's, the functions or the
        filters); unchanged by any other request."""
        arguments = request.arguments
        if request.command == "setBreakpoints":
            source = arguments.get("source")
            path = source.get("path") if isinstance(source, dict) else None
            wanted = arguments.get("breakpoints")
            if wanted is None:  # the deprecated form: lines only
                wanted = [{"line": line} for line in arguments.get("lines") or []]
            if not isinstance(path, str) or not isinstance(wanted, list):
                return self
            lines = [dict(b) for b in wanted if isinstance(b, dict) and "line" in b]
            return replace(self, sources={**self.sources, path: lines})
        if request.command == "setFunctionBreakpoints":
            return replace(self, functions=[dict(b) for b in arguments.get("breakpoints") or []
                                            if isinstance(b, dict) and b.get("name")])
        if request.command == "setExceptionBreakpoints":
            return replace(self, exceptions=[f for f in arguments.get("filters") or []
                                             if isinstance(f, str)])
        return self


class DapSessionBreakpoints:
    """What one attached DAP session's debugger has: its client's own breakpoints, and those
    of the breakpoint set the hub sent. ``remote_root``: where that process's code lives (None:
    paths stay as set)."""

    def __init__(self, remote_root: str | None) -> None:
        self._remote_root = remote_root
        self._own = DebuggerBreakpoints({})  # what the child's client set, as it sent them
        self._sent = DebuggerBreakpoints({})  # what the debugger has

    def client_sent(self, request: Request) -> None:
        """The child's client sent the debugger ``request`` (paths as the process names
        them): the debugger has just that of its kind now, and the client's own are kept."""
        self._own = self._own.with_request(request)
        self._sent = self._sent.with_request(request)

    def bring_up_to(self, cluster: ClusterBreakpointSet) -> list[Request]:
        """The requests that give the debugger its client's breakpoints and ``cluster``'s
        set as it is now (the client's first, where both set one line, function or
        filter): one for each file, the function list and the filter list that differ from
        what it has (a file with none left gets an empty list); ``[]`` when none does."""
        wanted = self._own.plus(DebuggerBreakpoints.of(cluster, self._remote_root))
        sent, self._sent = self._sent, wanted
        requests = [Request(seq=0, command="setBreakpoints", arguments={
                        "source": {"path": path}, "breakpoints": wanted.sources.get(path, [])})
                    for path in {**sent.sources, **wanted.sources}
                    if wanted.sources.get(path, []) != sent.sources.get(path, [])]
        if wanted.functions != sent.functions:
            requests.append(Request(seq=0, command="setFunctionBreakpoints",
                                    arguments={"breakpoints": wanted.functions}))
        if wanted.exceptions != sent.exceptions:
            requests.append(Request(seq=0, command="setExceptionBreakpoints",
                                    arguments={"filters": wanted.exceptions}))
        return requests
