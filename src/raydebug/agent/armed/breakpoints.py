"""Cluster breakpoints armed in this process, without pydevd, until one is hit.

Theory of operation. The hub sends every linked process the cluster's breakpoint set (the
editor's ``setBreakpoints`` and friends on its cluster session: :meth:`BreakpointSet.from_wire`
reads it). :class:`ArmedBreakpoints` turns it into the names this process's code objects carry
(``co_filename``: :func:`local_names`) and arms one of two backends, chosen by the interpreter:

- Python >= 3.12: :mod:`.monitoring`, ``sys.monitoring`` events only on the code objects
  of the files that have breakpoints; every other function runs at full speed;
- Python 3.10/3.11: :mod:`.code`, the functions of the files with breakpoints get
  rewritten code that calls us before each breakpoint line; no trace function, except where
  rewriting cannot serve a file: then :mod:`.tracing`, a trace function in every
  thread that returns at once for frames of other files (the costs: docs/design.md#armed).

The IDE's ``raised`` exception filter is armed by the same backends (which raises stop:
:mod:`.raised`); its stops go to ``on_raised(frame, exception, traceback)``.
``uncaught`` is the agent's (``RAYDEBUG_POST_MORTEM``).

A backend calls :meth:`ArmedBreakpoints.on_line` when a line with breakpoints runs; each of
its breakpoints evaluates its ``condition`` and ``hitCondition`` in the frame (what they see:
:mod:`.line_breakpoint`), a logpoint formats its ``logMessage`` for ``on_log`` and a
snapshot point calls ``on_snapshot(frame)`` (neither pauses), and a breakpoint calls
``on_hit(frame)``, which pauses the thread as a session (the
agent's pause path, where pydevd is first imported).

Thread-safety: :meth:`arm` and :meth:`disarm` may run on any thread (the link's); hits run on
the threads that reach the lines. A thread inside ``on_hit`` is never re-entered (see
:meth:`ArmedBreakpoints.on_line`).
"""

from __future__ import annotations

import os
import posixpath
import sys
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import CodeType, FrameType, TracebackType
from typing import Any

from ..report import say
from .line_breakpoint import ArmedLine, LineBreakpoint
from .raised import stops_here
from .watch import Backend

REASON_BREAKPOINT = "breakpoint"


@dataclass(frozen=True)
class SourceBreakpoints:
    """The breakpoints of one of the client's files: its ``path`` and, when the client gave
    one, the ``local_root`` its checkout lives in (the other side of Ray's working_dir)."""

    path: str
    breakpoints: tuple[LineBreakpoint, ...]
    local_root: str | None = None


@dataclass(frozen=True)
class BreakpointSet:
    """The cluster's breakpoints, as the hub sends them (:meth:`to_wire`/:meth:`from_wire`)."""

    sources: tuple[SourceBreakpoints, ...] = ()
    functions: tuple[str, ...] = ()  # DAP FunctionBreakpoint names: a qualname or a name
    exceptions: frozenset[str] = frozenset()  # "raised", "uncaught"

    @property
    def empty(self) -> bool:
        return not (any(s.breakpoints for s in self.sources) or self.functions
                    or self.exceptions)

    @classmethod
    def from_wire(cls, data: Mapping[str, Any]) -> BreakpointSet:
        """Read the hub's form; raises ValueError/KeyError/TypeError on a malformed one."""
        sources = tuple(
            SourceBreakpoints(path=str(s["path"]),
                              local_root=str(s["localRoot"]) if s.get("localRoot") else None,
                              breakpoints=tuple(LineBreakpoint.from_wire(b)
                                                for b in s.get("breakpoints") or ()))
            for s in data.get("sources") or ())
        functions = tuple(str(f["name"]) if isinstance(f, Mapping) else str(f)
                          for f in data.get("functions") or ())
        exceptions = frozenset(str(e) for e in data.get("exceptions") or ())
        return cls(sources, functions, exceptions)

    def to_wire(self) -> dict[str, Any]:
        return {
            "sources": [{"path": s.path, "localRoot": s.local_root,
                         "breakpoints": [{"line": b.line, "condition": b.condition,
                                          "hitCondition": b.hit_condition,
                                          "logMessage": b.log_message}
                                         for b in s.breakpoints]}
                        for s in self.sources],
            "functions": [{"name": name} for name in self.functions],
            "exceptions": sorted(self.exceptions),
        }


def local_names(source: SourceBreakpoints, remote_root: str | None) -> set[str]:
    """The ``co_filename`` values this process's code of ``source`` can carry: the client's
    own path (a function shipped by value from the driver's ``__main__``, a shared disk), and
    under ``remote_root`` (Ray's working_dir on this node) the path relative to the client's
    ``local_root``."""
    names = {source.path, os.path.normpath(source.path)}
    root = source.local_root
    if root and remote_root:
        flavour = posixpath if not ("\\" in root and "/" not in root) else None
        if flavour is None:  # a Windows client: its separators are not ours
            relative_windows = _relative(source.path.replace("\\", "/"),
                                         root.replace("\\", "/"))
            if relative_windows is not None:
                names.add(os.path.join(remote_root, relative_windows))
        else:
            relative = _relative(source.path, root)
            if relative is not None:
                names.add(os.path.normpath(os.path.join(remote_root, relative)))
    return names


def _relative(path: str, root: str) -> str | None:
    root = root.rstrip("/") + "/"
    return path[len(root):] if path.startswith(root) else None


@dataclass
class _Table:
    """What the backends read on their hot path: replaced whole, never mutated."""

    by_file: dict[str, dict[int, list[ArmedLine]]] = field(default_factory=dict)
    functions: frozenset[str] = frozenset()
    raised: bool = False  # the "raised" exception filter

    @property
    def armed(self) -> bool:
        return bool(self.by_file or self.functions or self.raised)

    @property
    def files(self) -> frozenset[str]:
        return frozenset(self.by_file)


class ArmedBreakpoints:
    """This process's cluster breakpoints (see the module docstring).

    ``on_hit(frame)`` pauses the calling thread at ``frame`` (blocks while it is paused);
    ``on_log(text, frame)`` takes a logpoint's text; ``on_snapshot(frame)`` a snapshot
    point's hit (it captures and returns); ``on_loaded(paths)`` is told, once per client
    path, that code of that file is loaded here. ``labels()`` and ``remote_root()`` are read at
    each :meth:`arm`. ``standing_down()`` true: a debugger serves this process (pydevd has the
    same breakpoints from the client), so pauses are left to it; logpoints still log here.
    """

    def __init__(self, on_hit: Callable[[FrameType], None],
                 on_log: Callable[[str, FrameType], None],
                 labels: Callable[[], Mapping[str, str]] | None = None,
                 remote_root: Callable[[], str | None] | None = None,
                 on_loaded: Callable[[list[str]], None] | None = None,
                 standing_down: Callable[[], bool] | None = None,
                 backend: Backend | None = None,
                 on_raised: Callable[[FrameType, BaseException, TracebackType | None], None]
                 | None = None,
                 on_snapshot: Callable[[FrameType], object] | None = None) -> None:
        self._on_hit = on_hit
        self._on_snapshot = on_snapshot or (lambda frame: None)
        self._on_raised = on_raised or (lambda frame, exception, traceback: None)
        self._on_log = on_log
        self._labels = labels or (lambda: {})
        self._remote_root = remote_root or (lambda: None)
        self._on_loaded = on_loaded or (lambda paths: None)
        self._standing_down = standing_down or (lambda: False)
        self._lock = threading.Lock()
        self._table = _Table()
        self._client_path: dict[str, str] = {}  # co_filename -> the client's path
        self._reported: set[str] = set()
        self._label_names: dict[str, str] = {}
        self._in_hit: set[int] = set()  # threads inside on_hit: never re-paused by us
        self._backend = backend if backend is not None else default_backend()

    # -- the set ---------------------------------------------------------------------------

    @property
    def files(self) -> frozenset[str]:
        return self._table.files

    @property
    def functions(self) -> frozenset[str]:
        return self._table.functions

    @property
    def raised(self) -> bool:
        return self._table.raised

    def lines_of(self, filename: str) -> Mapping[int, list[ArmedLine]]:
        return self._table.by_file.get(filename) or {}

    def arm(self, breakpoints: BreakpointSet) -> None:
        """Make ``breakpoints`` this process's set; an empty set disarms (no tracing left)."""
        with self._lock:
            old = self._table.by_file
            remote_root = self._remote_root()
            by_file: dict[str, dict[int, list[ArmedLine]]] = {}
            client_path: dict[str, str] = {}
            for source in breakpoints.sources:
                if not source.breakpoints:
                    continue
                for name in local_names(source, remote_root):
                    lines = by_file.setdefault(name, {})
                    for spec in source.breakpoints:
                        kept = [a for a in (old.get(name) or {}).get(spec.line, ())
                                if a.spec == spec]  # an unchanged breakpoint keeps its count
                        lines.setdefault(spec.line, []).append(kept[0] if kept else ArmedLine(spec))
                    client_path[name] = source.path
            labels = self._labels()
            # As set (RANK, team; see agent.config.process_labels) and in upper case (TEAM).
            self._label_names = {**{k.upper(): v for k, v in labels.items()}, **labels}
            self._client_path = client_path
            self._reported &= set(client_path.values())
            self._table = _Table(by_file, frozenset(breakpoints.functions),
                                 "raised" in breakpoints.exceptions)
            if not self._table.armed:
                self._backend.remove()
            elif self._standing_down() and getattr(self._backend, "shares_trace_function",
                                                   False):
                # A debugger serves this process and its tracer is in every thread: ours
                # would replace it. Installed once that tracing is removed (reinstall).
                pass
            else:
                self._backend.install(self)
        self.report_loaded()

    def disarm(self) -> None:
        self.arm(BreakpointSet())

    def active(self) -> bool:
        """Whether anything of ours is installed in the interpreter (a trace function, a
        ``sys.monitoring`` tool)."""
        return self._backend.active()

    def modes(self) -> dict[str, str]:
        """How each watched file is served here, for tests and ``raydebug ps``-like views:
        ``rewrite`` or ``trace: why`` (3.10/3.11, :mod:`.code`); empty otherwise."""
        modes = getattr(self._backend, "modes", None)
        return dict(modes()) if modes is not None else {}

    def reinstall(self) -> None:
        """Put the armed set back after someone else's tracing was removed from every
        thread (pydevd's, after a session): nothing happens when nothing is armed."""
        with self._lock:
            if self._table.armed:
                self._backend.install(self)

    def forget_after_fork(self) -> None:
        """In a fork child: disarm what the parent armed (another thread of the parent may
        have held a lock at the fork: fresh ones first)."""
        self._lock = threading.Lock()
        self._in_hit = set()
        self._table = _Table()
        self._client_path = {}
        self._backend.forget_after_fork()

    def report_loaded(self) -> None:
        """Tell ``on_loaded`` the client paths whose code is loaded here and not told yet
        (modules in ``sys.modules``, and the code of every thread's frames)."""
        loaded: set[str] = set()
        for module in list(sys.modules.values()):
            name = getattr(module, "__file__", None)
            if isinstance(name, str) and name in self._client_path:
                loaded.add(name)
        for top in sys._current_frames().values():
            frame: FrameType | None = top
            while frame is not None:
                if frame.f_code.co_filename in self._client_path:
                    loaded.add(frame.f_code.co_filename)
                frame = frame.f_back
        self._note_loaded(loaded)

    def note_code_loaded(self, code: CodeType) -> None:
        """A backend saw code of a watched file run for the first time."""
        name = code.co_filename
        client = self._client_path.get(name)
        if client is not None and client not in self._reported:
            self._note_loaded({name})

    def _note_loaded(self, names: set[str]) -> None:
        paths = sorted({self._client_path[n] for n in names if n in self._client_path}
                       - self._reported)
        if not paths:
            return
        self._reported.update(paths)
        try:
            self._on_loaded(paths)
        except Exception as error:  # the link is down: the hub asks again when it is back
            say(f"could not report loaded breakpoints ({type(error).__name__}: {error})")

    # -- hits (on the thread that reached the line) ---------------------------------------

    def on_line(self, frame: FrameType, line: int) -> bool:
        """``frame`` is about to run ``line``, which has breakpoints: log, or pause (then
        True, once resumed). Standing down, only log: a logpoint's line goes to the hub
        whoever debugs the process (the client's pydevd would say it to that client alone,
        or not at all when the client did not set it); its pausing is pydevd's."""
        ident = threading.get_ident()
        if ident in self._in_hit:
            return False
        armed = self.lines_of(frame.f_code.co_filename).get(line)
        if not armed:
            return False
        logging_only = self._standing_down()
        stop = False
        for breakpoint_ in armed:
            if logging_only and not breakpoint_.spec.log_message:
                continue
            if not breakpoint_.passes(frame, self._label_names):
                continue
            if breakpoint_.spec.is_snapshot:
                self._snapshot(breakpoint_, frame)
            elif breakpoint_.spec.log_message:
                self._log(breakpoint_, frame)
            else:
                stop = True
        if stop:
            self._pause(frame)
        return stop

    def on_function(self, frame: FrameType) -> bool:
        """``frame``'s function, which has a function breakpoint, starts: pause (True)."""
        if threading.get_ident() in self._in_hit or self._standing_down():
            return False
        self._pause(frame)
        return True

    def on_raise(self, frame: FrameType, exception: BaseException,
                 traceback: TracebackType | None) -> bool:
        """``exception`` was raised in ``frame`` or came out into it (``traceback``: its
        traceback there): pause (True, once resumed) if the ``raised`` filter is set and
        this raise stops here."""
        if (not self._table.raised or threading.get_ident() in self._in_hit
                or self._standing_down() or not stops_here(frame, exception, traceback)):
            return False
        self._pause(frame, (exception, traceback))
        return True

    def _pause(self, frame: FrameType,
               raised: tuple[BaseException, TracebackType | None] | None = None) -> None:
        ident = threading.get_ident()
        self._in_hit.add(ident)
        try:
            if raised is None:
                self._on_hit(frame)
            else:
                self._on_raised(frame, *raised)
        except Exception as error:  # the user's program runs on
            say(f"could not pause at a breakpoint ({type(error).__name__}: {error})")
        finally:
            self._in_hit.discard(ident)

    def _snapshot(self, armed: ArmedLine, frame: FrameType) -> None:
        """A snapshot point's hit: captured on this thread, which then runs on. A repr the
        capture calls that reaches a watched line is not hit again (``_in_hit``)."""
        ident = threading.get_ident()
        self._in_hit.add(ident)
        try:
            self._on_snapshot(frame)
        except Exception as error:  # the user's program runs on
            armed.say_once(f"could not take a snapshot ({type(error).__name__}: {error})")
        finally:
            self._in_hit.discard(ident)

    def _log(self, armed: ArmedLine, frame: FrameType) -> None:
        text = armed.log_text(frame, self._label_names)
        try:
            self._on_log(text, frame)
        except Exception as error:
            armed.say_once(f"could not send a logpoint's text ({error})")


def default_backend() -> Backend:
    """The backend for this interpreter (see the module docstring);
    ``RAYDEBUG_ARMED_BACKEND=trace`` keeps 3.10/3.11 on the trace function alone."""
    if sys.version_info >= (3, 12):
        from .monitoring import MonitoringBackend

        return MonitoringBackend()
    from .tracing import TracingBackend

    if os.environ.get("RAYDEBUG_ARMED_BACKEND", "").strip().lower() == "trace":
        return TracingBackend()
    from .code import CodeRewriteBackend

    return CodeRewriteBackend()
