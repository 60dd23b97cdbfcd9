"""Cluster breakpoints on Python 3.10/3.11 without a trace function: the functions of the
files with breakpoints get rewritten code, so only they pay anything.

Theory of operation. A trace function makes every Python call of every thread pay (a frame
object, a call into Python), even when it returns at once for other files: call-heavy code
ran at 0.09-0.20 of its speed (docs/design.md#armed). Instead, :meth:`CodeRewriteBackend.install`
(on the link thread):

1. compiles each watched file's source (``linecache``) twice, as it is and with a call of
   the builtin ``__raydebug_line__(L)`` before each breakpoint line (:mod:`.rewrite`);
2. finds the live functions of those files (one ``gc.get_objects()`` walk: its cost in a Ray
   worker's heap is in docs/design.md#armed), checks that each one's code is the original
   compilation (else the source changed since it was loaded) and swaps in the rewritten code
   (``func.__code__``; the nested code constants are rewritten too, so closures made later
   are covered);
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
only, until that frame returns. Not covered: code of a watched file that arrives by other
means after arming (``exec`` of its text, another unpickler).
"""

from __future__ import annotations

import builtins
import gc
import importlib.machinery
import importlib.util
import linecache
import os
import sys
import threading
import weakref
from collections.abc import Iterable, Mapping
from types import (
    AsyncGeneratorType,
    CodeType,
    CoroutineType,
    FrameType,
    FunctionType,
    GeneratorType,
)
from typing import Any

from ...errors import NotRewritableError
from ..report import say
from . import shipped as armed_shipped
from .rewrite import HOOK_NAME, Plan, make_plan
from .tracing import TracingBackend, set_in_threads
from .watch import Watched

REWRITE = "rewrite"
TRACE = "trace"
_active: CodeRewriteBackend | None = None  # the backend the builtin calls


def adopt_shipped(function: FunctionType) -> None:
    """An integration made ``function`` from shipped code (:mod:`.shipped` keeps it
    for sets armed later): rewritten now if its file has breakpoints."""
    backend = _active
    if backend is not None and backend.armed:
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
        self._armed: Watched | None = None
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
        self._running = _RunningFrames(self)

    @property
    def armed(self) -> bool:
        return self._armed is not None

    # -- the Backend protocol --------------------------------------------------------------

    def install(self, armed: Watched) -> None:
        global _active
        with self._lock:
            lines = {name: frozenset(armed.lines_of(name)) for name in armed.files}
            signature = (lines, armed.functions, armed.raised)
            if (armed is self._armed and signature == self._signature and not self._traced
                    and not armed.raised and not self._running.active()):
                return  # again after a session: nothing of ours was replaced
            self._armed, self._signature, self._watched = armed, signature, frozenset(lines)
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
                source = _source(name)
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
            if self._armed is None:
                return
            self._apply({}, {}, None)
            self._armed, self._signature, self._watched = None, None, frozenset()
            self._why_not = {}
        _wrap_imports(False)

    def active(self) -> bool:
        return self._armed is not None

    def forget_after_fork(self) -> None:
        self._lock = threading.RLock()
        self._running = _RunningFrames(self)
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
        armed = self._armed
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
            armed, name = self._armed, code.co_filename
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
            armed = self._armed
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
        functions, suspended = _scan(frozenset(scanned),
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
        running = _running_frames(frozenset(self._plans), current) if armed else {}
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
        self._trace_fallback(self._armed)

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


class _RunningFrames:
    """Frames of a rewritten file that were running the original code when armed: a trace
    function on their threads only (returning None for every call: no other frame is traced)
    and line events for those frames, until each returns."""

    def __init__(self, backend: CodeRewriteBackend) -> None:
        self._backend = backend
        self._pending: dict[int, set[FrameType]] = {}

    def active(self) -> bool:
        return bool(self._pending)

    def follow(self, running: Mapping[int, list[FrameType]]) -> bool:
        """Trace ``running`` (thread -> frames) instead of what was; False if a thread
        could not be reached (then nothing is left set)."""
        gone = set(self._pending) - set(running)
        for pending in self._pending.values():
            for frame in pending:
                if getattr(frame.f_trace, "raydebug_armed", False):
                    frame.f_trace = None
        self._pending = {}
        if gone and not self._backend._tracing.active():
            set_in_threads(_remove_myself, gone)
        if not running:
            return True
        self._pending = {ident: set(frames) for ident, frames in running.items()}
        local = self._local
        for frames in running.values():
            for frame in frames:
                frame.f_trace = local
        if set_in_threads(_calls_untraced, set(running)):
            return True
        self.follow({})
        return False

    def _local(self, frame: FrameType, event: str, arg: Any) -> None:
        # An exception here would reach the user's code (and end the thread's tracing).
        try:
            self._event(frame, event)
        except Exception as error:
            say(f"a breakpoint failed ({type(error).__name__}: {error})")

    def _event(self, frame: FrameType, event: str) -> None:
        backend = self._backend
        armed = backend._armed
        if armed is None:
            return
        if event == "line":
            line = frame.f_lineno
            if (line in armed.lines_of(frame.f_code.co_filename)
                    and line not in backend.hooked_lines(frame.f_code)):
                armed.on_line(frame, line)
        elif event == "return":
            ident = threading.get_ident()
            pending = self._pending.get(ident)  # follow() may replace the dict meanwhile
            if pending is not None:
                pending.discard(frame)
                if not pending and self._pending.pop(ident, None) is not None \
                        and not backend._tracing.active():  # else the fallback's, everywhere
                    _remove_myself(frame, event, None)


def _calls_untraced(frame: FrameType, event: str, arg: Any) -> None:
    """A thread's trace function that traces no call (the running frames have their own)."""


def _remove_myself(frame: FrameType, event: str, arg: Any) -> None:
    from .tracing import _raw_settrace

    _raw_settrace()(None)


for _function in (_calls_untraced, _RunningFrames._local):
    setattr(_function, "raydebug_armed", True)  # noqa: B010 (marks ours)


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


def _source(filename: str) -> str | None:
    lines = linecache.getlines(filename)
    return "".join(lines) if lines else None


_GENERATORS = {GeneratorType: "gi_frame", CoroutineType: "cr_frame",
               AsyncGeneratorType: "ag_frame"}


def _scan(files: frozenset[str], known_codes: Iterable[CodeType] = ()
          ) -> tuple[list[FunctionType], list[FrameType]]:
    """The live functions of ``files``, and the frames of their suspended generators.

    Not ``gc.get_objects()``: its list holds a reference to every object, tuples that another
    thread is still filling among them (``tuple(generator)`` resizes its tuple, which needs
    a reference count of 1), and while the list lives the GIL may pass to that thread: its
    ``tuple()`` then fails with "SystemError: Objects/tupleobject.c: bad argument to
    internal function" (seen in a Ray worker importing pydantic as a set was armed). Instead:
    every function of a file has its module's namespace as ``__globals__``, so the
    referrers of those namespaces are its functions (closures made since included), and the
    referrers of their code objects are its generators; neither can be a tuple in the
    making. Functions rebuilt from shipped code (:mod:`.shipped`) bring their own
    namespaces."""
    if not files:
        return [], []
    shipped = [f for f in list(armed_shipped.functions) if f.__code__.co_filename in files]
    namespaces = {id(f.__globals__): f.__globals__ for f in shipped}
    for module in list(sys.modules.values()):
        namespace = getattr(module, "__dict__", None)
        if isinstance(namespace, dict) and _defined_in(namespace, files):
            namespaces[id(namespace)] = namespace
    found = {id(f): f for f in shipped}
    for referrer in gc.get_referrers(*namespaces.values()):
        if type(referrer) is FunctionType and referrer.__code__.co_filename in files:
            found[id(referrer)] = referrer
    functions = list(found.values())
    codes = {id(code): code for f in functions for code in _codes_of(f.__code__)}
    codes.update((id(code), code) for code in known_codes)  # what a generator may still run
    suspended = []
    for referrer in gc.get_referrers(*codes.values()):
        kind = type(referrer)
        if kind in _GENERATORS:
            frame = getattr(referrer, _GENERATORS[kind])
            if frame is not None and frame.f_code.co_filename in files:
                suspended.append(frame)
    return functions, suspended


def _defined_in(namespace: dict[str, Any], files: frozenset[str]) -> bool:
    """Whether ``namespace`` is the module namespace of one of ``files``."""
    path = namespace.get("__file__")
    if isinstance(path, str) and (path in files or os.path.abspath(path) in files):
        return True
    spec = namespace.get("__spec__")
    return getattr(spec, "origin", None) in files


def _codes_of(code: CodeType) -> list[CodeType]:
    """``code`` and every code object nested in its constants."""
    codes = [code]
    for constant in code.co_consts:
        if isinstance(constant, CodeType):
            codes.extend(_codes_of(constant))
    return codes


def _running_frames(files: frozenset[str], current: set[int]) -> dict[int, list[FrameType]]:
    """Frames of ``files`` on some thread's stack that run code other than ``current``."""
    running: dict[int, list[FrameType]] = {}
    for ident, top in sys._current_frames().items():
        frame: FrameType | None = top
        while frame is not None:
            if frame.f_code.co_filename in files and id(frame.f_code) not in current:
                running.setdefault(ident, []).append(frame)
            frame = frame.f_back
    return running


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
