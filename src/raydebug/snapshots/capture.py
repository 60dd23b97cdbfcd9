"""Build a snapshot's frames from a traceback or a running frame, within :mod:`.limits`.

Theory of operation. Capture runs on the thread that failed or hit a snapshot point, while
that thread waits: it must be quick and must never raise nor change the program. It reads
each frame's ``f_locals`` once and turns every value into a :class:`.format.Value`: its
type's name, a ``reprlib`` repr capped at :attr:`SnapshotLimits.repr_chars`, and, for a
container (list, tuple, set, dict, any other mapping) or an object with a ``__dict__``, its
parts to :attr:`SnapshotLimits.depth` levels and :attr:`SnapshotLimits.width` items. Nothing
else of the object is called: no property, no ``__getattr__``, no ``__len__`` beyond the
built-in containers'; a repr that raises shows as its error; an object met again on the way
down (a cycle) is a leaf. A running tally of the bytes the JSON will take stops the capture
at :attr:`SnapshotLimits.max_bytes`: what is left out is marked ``truncated``, and a frame
whose locals were cut ends with a value named ``...`` saying so. Each frame's file text comes
from ``linecache`` (what the process runs), once the locals of every frame are in.
"""

from __future__ import annotations

import linecache
import reprlib
import secrets
import threading
import time
import traceback
import types
from collections.abc import Callable, Mapping
from types import FrameType, TracebackType
from typing import Any

from .format import FORMAT_VERSION, ExceptionInfo, FrameCapture, Snapshot
from .limits import DEFAULT_LIMITS, SnapshotLimits

# What a value costs in its JSON besides its name, type and repr (keys, quotes, commas).
_VALUE_OVERHEAD = 40
_LEAF_TYPES = (type(None), bool, int, float, complex, str, bytes, bytearray, range)
_SHORT_INT = 10 ** 18  # an int whose repr needs no cut
_ESCAPED = 6  # JSON characters of a character beyond ASCII (\uXXXX), at most
_SEQUENCES = (list, tuple, set, frozenset)
# Objects whose __dict__ is not their state: code, not data.
_NOT_EXPANDED = (type, types.ModuleType, types.FunctionType, types.MethodType,
                 types.BuiltinFunctionType, types.CodeType, types.FrameType, classmethod,
                 staticmethod, property)
CUT_NAME = "..."


def new_snapshot_id() -> str:
    """``x`` and 12 hex digits: apart from sessions' and processes' ids."""
    return "x" + secrets.token_hex(6)


def capture_frames(tb_or_frame: TracebackType | FrameType | None,
                   limits: SnapshotLimits = DEFAULT_LIMITS,
                   hide: Callable[[str], bool] | None = None) -> list[FrameCapture]:
    """The frames of a traceback (to where it was raised) or of a frame and its callers,
    innermost first, at most :attr:`SnapshotLimits.max_frames`; frames whose file ``hide``
    names (raydebug's own) are left out. Never raises for what a value does."""
    return [FrameCapture.from_json(frame)
            for frame in capture_frames_json(tb_or_frame, limits, hide)]


def capture_frames_json(tb_or_frame: TracebackType | FrameType | None,
                        limits: SnapshotLimits = DEFAULT_LIMITS,
                        hide: Callable[[str], bool] | None = None) -> list[dict[str, Any]]:
    """:func:`capture_frames` in the wire form (:meth:`FrameCapture.to_json`'s dicts), built
    as such: what an agent sends, without making the dataclasses first."""
    frames = _frames_innermost_first(tb_or_frame, limits.max_frames, hide)
    budget = _Budget(limits.max_bytes)
    captured = []
    for frame, line in frames:
        code = frame.f_code
        budget.spend(len(code.co_filename) + len(code.co_name) + _VALUE_OVERHEAD)
        captured.append((frame, line, _frame_locals(frame, limits, budget)))
    sources: dict[str, str | None] = {}
    result = []
    for frame, line, values in captured:
        path = frame.f_code.co_filename
        if path not in sources:
            sources[path] = _source(path, limits, budget)
        result.append({"function": frame.f_code.co_name, "path": path, "line": line,
                       "source": sources[path], "locals": values})
    return result


def exception_snapshot_json(error: BaseException, process: dict[str, Any],
                            limits: SnapshotLimits = DEFAULT_LIMITS,
                            hide: Callable[[str], bool] | None = None,
                            thread_name: str | None = None,
                            start: TracebackType | None = None) -> dict[str, Any]:
    """A failure snapshot (``reason`` ``"exception"``) of ``error`` and its traceback, in
    the wire form (:meth:`Snapshot.to_json`'s dict). ``start``: the entry of that traceback
    the user's part starts at (default: all of it), when the outer frames before it are
    the code that ran the failing one (Ray's task executor): its frames and its text."""
    start = start or error.__traceback__
    text = "".join(traceback.format_exception(type(error), error, start))
    try:
        message = str(error)
    except Exception as failure:  # a __str__ that raises: say so
        message = f"<str() failed: {type(failure).__name__}>"
    info = ExceptionInfo(type_name=type(error).__qualname__,
                         message=message[:limits.repr_chars * 10],
                         traceback_text=text[-limits.source_bytes:])
    return _snapshot_json("exception", process, thread_name, info,
                          capture_frames_json(start, limits, hide))


def point_snapshot_json(frame: FrameType, process: dict[str, Any],
                        limits: SnapshotLimits = DEFAULT_LIMITS,
                        hide: Callable[[str], bool] | None = None) -> dict[str, Any]:
    """A snapshot point's snapshot (``reason`` ``"snapshot"``) of ``frame`` and its callers,
    in the wire form."""
    return _snapshot_json("snapshot", process, None, None,
                          capture_frames_json(frame, limits, hide))


def _snapshot_json(reason: str, process: dict[str, Any], thread_name: str | None,
                   exception: ExceptionInfo | None,
                   frames: list[dict[str, Any]]) -> dict[str, Any]:
    return {"format": FORMAT_VERSION, "id": new_snapshot_id(), "reason": reason,
            "time": time.time(), "process": dict(process),
            "thread_name": thread_name or threading.current_thread().name,
            "exception": exception.to_json() if exception is not None else None,
            "frames": frames}


def capture_exception(error: BaseException, process: dict[str, Any],
                      limits: SnapshotLimits = DEFAULT_LIMITS,
                      hide: Callable[[str], bool] | None = None,
                      thread_name: str | None = None) -> Snapshot:
    """:func:`exception_snapshot_json` as a :class:`Snapshot`."""
    return Snapshot.from_json(exception_snapshot_json(error, process, limits, hide,
                                                      thread_name))


def capture_point(frame: FrameType, process: dict[str, Any],
                  limits: SnapshotLimits = DEFAULT_LIMITS,
                  hide: Callable[[str], bool] | None = None) -> Snapshot:
    """:func:`point_snapshot_json` as a :class:`Snapshot`."""
    return Snapshot.from_json(point_snapshot_json(frame, process, limits, hide))


def _frames_innermost_first(start: TracebackType | FrameType | None, most: int,
                            hide: Callable[[str], bool] | None) -> list[tuple[FrameType, int]]:
    frames: list[tuple[FrameType, int]] = []
    if isinstance(start, TracebackType):
        tb: TracebackType | None = start
        while tb is not None:
            frames.append((tb.tb_frame, tb.tb_lineno))
            tb = tb.tb_next
        frames.reverse()
    else:
        frame = start
        while frame is not None and len(frames) < most * 2:
            frames.append((frame, frame.f_lineno or frame.f_code.co_firstlineno))
            frame = frame.f_back
    if hide is not None:
        frames = [(frame, line) for frame, line in frames if not hide(frame.f_code.co_filename)]
    return frames[:most]


class _Budget:
    """The bytes left of a snapshot's JSON."""

    def __init__(self, total: int) -> None:
        self.left = total

    def spend(self, count: int) -> bool:
        """Take ``count`` bytes; False (nothing taken) when fewer are left."""
        if count > self.left:
            self.left = 0
            return False
        self.left -= count
        return True


def _frame_locals(frame: FrameType, limits: SnapshotLimits,
                  budget: _Budget) -> list[dict[str, Any]]:
    try:
        items = list(frame.f_locals.items())
    except Exception as error:  # a frame whose locals cannot be read: say why
        return [_cut_json("?", f"<cannot read locals: {type(error).__name__}>")]
    walker = _Walker(limits, budget)
    values: list[dict[str, Any]] = []
    for name, value in items[:limits.width]:
        captured = walker.value(str(name), value, 0)
        if captured is None:
            values.append(_cut_json(CUT_NAME, f"<{len(items) - len(values)} more not "
                                              "captured: the snapshot's size limit>"))
            return values
        values.append(captured)
    if len(items) > limits.width:
        values.append(_cut_json(CUT_NAME, f"<{len(items) - limits.width} more not captured: "
                                          "the width limit>"))
    return values


def _cut_json(name: str, text: str) -> dict[str, Any]:
    return {"name": name, "type": "", "repr": text, "truncated": True}


class _Walker:
    """Turns values into :class:`.format.Value` trees, in their wire form (dicts: what is
    sent; the dataclasses would cost as much again), for one frame."""

    def __init__(self, limits: SnapshotLimits, budget: _Budget) -> None:
        self.limits = limits
        self.budget = budget
        self.repr = reprlib.Repr()
        self.repr.maxstring = self.repr.maxother = limits.repr_chars
        self.repr.maxlong = limits.repr_chars // 2
        self.on_path: set[int] = set()

    def value(self, name: str, value: Any, level: int) -> dict[str, Any] | None:
        """``value`` as a Value named ``name``, ``level`` levels below a local; None when
        the budget is spent."""
        kind = type(value)
        text = self._repr(value, kind)
        size = len(name) + len(kind.__name__) + _VALUE_OVERHEAD + (
            len(text) if text.isascii() else len(text) * _ESCAPED)
        if not self.budget.spend(size):
            return None
        captured: dict[str, Any] = {"name": name, "type": kind.__qualname__, "repr": text}
        parts = None if kind in _LEAF_TYPES or isinstance(value, _LEAF_TYPES) \
            else _parts(value, kind)
        if parts is None:
            if len(text) >= self.limits.repr_chars:
                captured["truncated"] = True
            return captured
        if level >= self.limits.depth or id(value) in self.on_path:
            captured["truncated"] = True
            return captured
        self.on_path.add(id(value))
        try:
            self._expand(captured, parts, level)
        finally:
            self.on_path.discard(id(value))
        return captured

    def _expand(self, captured: dict[str, Any], parts: Any, level: int) -> None:
        children: list[dict[str, Any]] = []
        captured["children"] = children
        width = self.limits.width
        spend = self.budget.spend
        try:
            for index, (child_name, child) in enumerate(parts):
                if index >= width:
                    captured["truncated"] = True
                    return
                kind = type(child)
                if kind is float or (kind is int and -_SHORT_INT < child < _SHORT_INT):
                    # The common case of a long list (numbers): inline, as value() would.
                    text = repr(child)
                    if not spend(len(child_name) + len(text) + _VALUE_OVERHEAD + 5):
                        captured["truncated"] = True
                        return
                    children.append({"name": child_name, "type": kind.__name__,
                                     "repr": text})
                    continue
                found = self.value(child_name, child, level + 1)
                if found is None:
                    captured["truncated"] = True
                    return
                children.append(found)
        except Exception:  # a container changed by another thread, or a broken mapping
            captured["truncated"] = True

    def _repr(self, value: Any, kind: type) -> str:
        # The common scalars directly (reprlib would call repr() too, through two layers);
        # a long string or a huge int through reprlib, which cuts them.
        if kind is float or kind is bool or value is None or (
                kind is int and -_SHORT_INT < value < _SHORT_INT) or (
                kind is str and len(value) < self.limits.repr_chars - 2):
            return repr(value)
        try:
            return self.repr.repr(value)
        except Exception as error:
            return f"<repr failed: {type(error).__name__}: {error}>"[:self.limits.repr_chars]


def _parts(value: Any, kind: type) -> Any:
    """``(name, part)`` pairs of what ``value`` holds, lazily; None for a leaf."""
    if isinstance(value, _SEQUENCES):
        return ((f"[{index}]", item) for index, item in enumerate(value))
    if isinstance(value, Mapping):
        return ((f"[{_key_repr(key)}]", item) for key, item in value.items())
    if isinstance(value, _NOT_EXPANDED):
        return None
    try:
        attributes = object.__getattribute__(value, "__dict__")
    except Exception:  # no __dict__ (slots, C objects): a leaf
        return None
    if not isinstance(attributes, dict):
        return None
    return iter(list(attributes.items()))


def _source(path: str, limits: SnapshotLimits, budget: _Budget) -> str | None:
    """The text of the file at ``path`` as the process runs it; None when unknown (a
    ``<string>``), larger than :attr:`SnapshotLimits.source_bytes` or past the budget."""
    try:
        lines = linecache.getlines(path)
    except Exception:  # a loader that raises: no text
        return None
    size = sum(len(line) for line in lines)
    if not lines or size > limits.source_bytes:
        return None
    text = "".join(lines)
    # JSON escapes each newline, quote and backslash with one more character, and each
    # character beyond ASCII with six.
    escaped = len(lines) + text.count('"') + text.count("\\") if text.isascii() \
        else size * (_ESCAPED - 1)
    return text if budget.spend(size + escaped + _VALUE_OVERHEAD) else None


def _key_repr(key: Any) -> str:
    try:
        return reprlib.repr(key)
    except Exception as error:
        return f"<key repr failed: {type(error).__name__}>"
