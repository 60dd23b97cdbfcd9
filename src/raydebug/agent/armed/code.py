"""Cluster breakpoints on Python 3.10/3.11 without a trace function: the functions of the
files with breakpoints get rewritten code, so only they pay anything.

Theory of operation. A trace function makes every Python call of every thread pay (a frame
object, a call into Python), even when it returns at once for other files: call-heavy code
runs several times slower (measured: docs/design.md#armed). Instead,
:meth:`CodeRewriteBackend.install` (on the link thread):

1. compiles each watched file's source (``linecache``) twice, as it is and with a call of
   the builtin ``__raydebug_line__(L)`` before each breakpoint line (:mod:`.rewrite`);
2. finds the live functions of those files (:func:`.live_code.scan`), checks that each
   one's code is the original compilation (else the source changed since it was loaded) and
   swaps in the rewritten code (``func.__code__``; the nested code constants are rewritten
   too, so closures made later are covered);
3. covers code loaded later: a module imported from a watched file compiles rewritten
   (``SourceFileLoader.get_code`` wrapped while armed), and an integration can hand over the
   functions it makes (:mod:`.shipped`: Ray's cloudpickle, for functions shipped by
   value from the driver's ``__main__``).

The builtin calls :meth:`ArmedBreakpoints.on_line` with the caller's frame: conditions, hit
counts, logpoints and the pause are exactly the trace path's. Clearing the last breakpoint
puts the original code objects back (the builtin stays, doing nothing: a frame still running
rewritten code may call it).

Where rewriting cannot serve a file, it is traced instead, never missed (:mod:`.tracing`
on that file's code only; :meth:`CodeRewriteBackend.modes` says which and why): no source, or
not the source the live code came from; a line :mod:`.rewrite` cannot serve; a
suspended generator of the file; function breakpoints (any function may match: everything is
traced). A frame of a watched file already running the original code (a loop, a task that
started before the set arrived) gets line events through a trace function set on its thread
only, until that frame returns (:mod:`.running_frames`). Not covered: code of a watched file
that arrives by other means after arming (``exec`` of its text, another unpickler).
"""

from __future__ import annotations

import builtins
import importlib.machinery
import importlib.util
import sys
import threading
import weakref
from collections.abc import Mapping
from types import CodeType, FrameType, FunctionType
from typing import Any

from ...errors import NotRewritableError
from ..report import say
from .live_code import scan, source_of
from .rewrite import HOOK_NAME, Plan, make_plan
from .running_frames import RunningFrames, running_frames
from .tracing import TracingBackend
from .watch import Watched

REWRITE = "rewrite"
TRACE = "trace"
_active: CodeRewriteBackend | None = None  # the backend the builtin calls


def adopt_shipped(function: FunctionType) -> None:
    """An integration made ``function`` from shipped code (:mod:`.shipped` keeps it
    for sets armed later): rewritten now if its file has breakpoints."""
    backend = _active
    if backend is not None and backend.armed is not None:
        try:
            backend.adopt(function)
        except Exception as error:  # the unpickle (a task's start) must not fail for us
            say(f"could not arm a shipped function ({type(error).__name__}: {error})")


def _line_hook(line: int) -> None:
    """``__raydebug_line__(L)``, called by rewritten code before line ``L`` runs."""
    backend = _active
    if backend is not None:
        backend.hit(sys._getframe(1), line)


class CodeRewriteBackend:
    """See the module docstring. Thread-safe (one reentrant lock)."""

    # Its fallback is a trace function: while pydevd traces, installing would replace it.
    shares_trace_function = True

    def __init__(self, tracing: TracingBackend | None = None) -> None:
        self._lock = threading.RLock()
        self._tracing = tracing or TracingBackend()
        self.armed: Watched | None = None  # the set installed; None: nothing is
        self._signature: object = None
        self._plans: dict[str, Plan | None] = {}  # rewritten files (None: see _why_not)
        self._why_not: dict[str, str] = {}  # why a None plan's file is traced once loaded
        self._traced: dict[str, str] = {}  # traced files, and why
        self._rewriting: frozenset[str] = frozenset()  # what the builtin serves
        self._watched: frozenset[str] = frozenset()
        # Every rewritten code object we made -> (itself, its original, its lines).
        self._made: dict[int, tuple[CodeType, CodeType, frozenset[int]]] = {}
        self._originals: weakref.WeakKeyDictionary[FunctionType, CodeType] = (
            weakref.WeakKeyDictionary())
        self._running = RunningFrames(self, self._tracing)

    # -- the Backend protocol --------------------------------------------------------------

    def install(self, armed: Watched) -> None:
        global _active
        with self._lock:
            lines = {name: frozenset(armed.lines_of(name)) for name in armed.files}
            signature = (lines, armed.functions, armed.raised)
            if (armed is self.armed and signature == self._signature and not self._traced
                    and not armed.raised and not self._running.active()):
                return  # again after a session: nothing of ours was replaced
            self.armed, self._signature, self._watched = armed, signature, frozenset(lines)
            _active = self
            setattr(builtins, HOOK_NAME, _line_hook)  # a name only rewritten code uses
            if armed.functions or armed.raised:  # only a trace function sees every function
                why = "function breakpoints" if armed.functions else "the raised filter"
                self._apply({}, {name: why for name in lines}, armed)
                return
            plans: dict[str, Plan | None] = {}
            why_not: dict[str, str] = {}
            for name, wanted in lines.items():
                old = self._plans.get(name)
                if old is not None and old.lines == wanted:
                    plans[name] = old  # the same code: frames running it need nothing
                    continue
                # Traced only once code of it is loaded here (a client's path that is not
                # on this node, a file of another process's job cost nothing).
                source = source_of(name)
                try:
                    plans[name] = make_plan(name, source, wanted) if source else None
                except NotRewritableError as error:
                    plans[name] = None
                    why_not[name] = str(error)
                if plans[name] is None:
                    why_not.setdefault(name, "no source here")
            self._why_not = why_not
            self._apply(plans, {}, armed)
        _wrap_imports(True)

    def remove(self) -> None:
        with self._lock:
            if self.armed is None:
                return
            self._apply({}, {}, None)
            self.armed, self._signature, self._watched = None, None, frozenset()
            self._why_not = {}
        _wrap_imports(False)

    def active(self) -> bool:
        return self.armed is not None

    def forget_after_fork(self) -> None:
        self._lock = threading.RLock()
        self._running = RunningFrames(self, self._tracing)
        self._tracing.forget_after_fork()
        self.remove()

    def modes(self) -> dict[str, str]:
        """Each watched file: ``rewrite`` (also before its code is loaded), ``trace: why``, or
        ``trace once loaded: why`` (nothing of it is loaded yet)."""
        with self._lock:
            modes = {name: REWRITE if plan is not None
                     else f"{TRACE} once loaded: {self._why_not.get(name, 'no source here')}"
                     for name, plan in self._plans.items()}
            modes.update({name: f"{TRACE}: {why}" for name, why in self._traced.items()})
            return modes

    # -- the hot path ----------------------------------------------------------------------

    def hit(self, frame: FrameType, line: int) -> None:
        armed = self.armed
        if armed is None or frame.f_code.co_filename not in self._rewriting:
            return  # cleared, or traced now (the trace function sees it)
        try:
            armed.on_line(frame, line)
        except Exception as error:  # the user's program runs on
            say(f"a breakpoint failed ({type(error).__name__}: {error})")

    def adopt(self, function: FunctionType) -> None:
        """A function made after arming (by an integration): rewrite it if it is ours."""
        code = function.__code__
        if code.co_filename not in self._watched:
            return
        with self._lock:
            armed, name = self.armed, code.co_filename
            if armed is None or name in self._traced or name not in self._plans:
                return
            plan = self._plans[name]
            rewritten = plan.rewritten_for(code) if plan is not None else None
            if rewritten is None:
                self._fall_back(name, self._why_not.get(name, "no source here") if plan is None
                                else "its source is not the shipped code's")
                return
            self._originals.setdefault(function, code)
            function.__code__ = rewritten
        armed.note_code_loaded(code)

    def code_for_import(self, path: str, source: bytes) -> CodeType | None:
        """The module code to run for an import of ``path``, or None (load it as usual)."""
        with self._lock:
            armed = self.armed
            if armed is None or path not in self._watched or path in self._traced:
                return None
            try:
                plan = make_plan(path, importlib.util.decode_source(source),
                                 frozenset(armed.lines_of(path)))
            except NotRewritableError as error:
                self._fall_back(path, str(error))
                return None
            self._plans[path] = plan
            self._remember(plan)
            self._rewriting = frozenset(self._plans)
            return plan.module

    # -- applying a set --------------------------------------------------------------------

    def _apply(self, plans: dict[str, Plan | None], traced: dict[str, str],
               armed: Watched | None) -> None:
        """Make ``plans`` the rewritten files and ``traced`` the traced ones; every other
        function we rewrote gets its original code back."""
        current = {id(rewritten) for plan in plans.values() if plan is not None
                   for rewritten, _ in plan.rewritten()}
        scanned = set(plans) | set(traced) | set(self._plans) | set(self._traced)
        functions, suspended = scan(frozenset(scanned),
                                     [code for made in self._made.values() for code in made[:2]])
        for frame in suspended:
            name = frame.f_code.co_filename
            if name in plans and id(frame.f_code) not in current:
                traced[name] = "a generator of it was suspended when armed"
        swaps: list[tuple[FunctionType, CodeType]] = []
        for function in functions:
            name = function.__code__.co_filename
            if name in plans and name not in traced:
                plan = plans[name]
                rewritten = (plan.rewritten_for(self._original(function.__code__))
                             if plan is not None else None)
                if rewritten is None:
                    traced[name] = (self._why_not.get(name, "no source here") if plan is None
                                    else "its source changed since it was loaded")
                else:
                    swaps.append((function, rewritten))
        for function in functions:
            if function.__code__.co_filename not in plans or \
                    function.__code__.co_filename in traced:
                self._restore(function)
        for function, rewritten in swaps:
            if function.__code__.co_filename not in traced:
                self._originals.setdefault(function, function.__code__)
                function.__code__ = rewritten
        self._plans = {name: plan for name, plan in plans.items() if name not in traced}
        self._traced = traced
        for plan in self._plans.values():
            if plan is not None:
                self._remember(plan)
        self._rewriting = frozenset(self._plans)
        self._trace_fallback(armed)
        running = running_frames(frozenset(self._plans), current) if armed else {}
        if not self._running.follow(running):
            for frames in running.values():
                for frame in frames:
                    self._traced[frame.f_code.co_filename] = (
                        "a frame of it was running when armed")
            self._running.follow({})
            self._plans = {n: p for n, p in self._plans.items() if n not in self._traced}
            self._rewriting = frozenset(self._plans)
            self._trace_fallback(armed)
        if armed is not None:
            for function, _ in swaps:
                armed.note_code_loaded(function.__code__)

    def _fall_back(self, name: str, why: str) -> None:
        """Trace ``name`` from now on (under the lock)."""
        self._traced[name] = why
        self._plans.pop(name, None)
        self._rewriting = frozenset(self._plans)
        self._trace_fallback(self.armed)

    def _trace_fallback(self, armed: Watched | None) -> None:
        if armed is not None and (self._traced or armed.raised):  # raised: every user frame
            self._tracing.install(_FilesView(armed, frozenset(self._traced)))
        else:
            self._tracing.remove()

    def _remember(self, plan: Plan) -> None:
        for rewritten, original in plan.rewritten():
            self._made[id(rewritten)] = (rewritten, original, plan.lines)

    def _original(self, code: CodeType) -> CodeType:
        made = self._made.get(id(code))
        return made[1] if made is not None else code

    def _restore(self, function: FunctionType) -> None:
        original = self._originals.pop(function, None)
        if original is not None:
            function.__code__ = original
        elif id(function.__code__) in self._made:  # made by rewritten code, or imported so
            function.__code__ = self._made[id(function.__code__)][1]

    def hooked_lines(self, code: CodeType) -> frozenset[int]:
        """The lines at which ``code`` (if we rewrote it) calls the builtin."""
        made = self._made.get(id(code))
        return made[2] if made is not None else frozenset()


class _FilesView:
    """The armed set, as the trace fallback sees it: only ``files``."""

    def __init__(self, armed: Watched, files: frozenset[str]) -> None:
        self._armed = armed
        self.files = files
        self.functions = armed.functions

    def lines_of(self, filename: str) -> Mapping[int, Any]:
        return self._armed.lines_of(filename) if filename in self.files else {}

    def on_line(self, frame: FrameType, line: int) -> bool:
        return self._armed.on_line(frame, line)

    def on_function(self, frame: FrameType) -> bool:
        return self._armed.on_function(frame)

    def note_code_loaded(self, code: CodeType) -> None:
        self._armed.note_code_loaded(code)

    def __getattr__(self, name: str) -> Any:  # what later backends read of the set
        return getattr(self._armed, name)


_loader_get_code = importlib.machinery.SourceFileLoader.get_code


def _get_code(loader: importlib.machinery.SourceFileLoader, fullname: str) -> CodeType | None:
    """``SourceFileLoader.get_code`` while armed: a watched file compiles rewritten (and
    leaves no .pyc behind: the next import compiles the original again)."""
    backend = _active
    path = loader.get_filename(fullname)
    if backend is not None and path in backend._watched:
        code = backend.code_for_import(path, loader.get_data(path))
        if code is not None:
            return code
    return _loader_get_code(loader, fullname)


def _wrap_imports(on: bool) -> None:
    loader: Any = importlib.machinery.SourceFileLoader
    if on:
        loader.get_code = _get_code
    elif "get_code" in vars(loader):
        del loader.get_code  # SourceLoader's again
