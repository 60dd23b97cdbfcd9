"""What a snapshot is: the one format the agent writes and the hub and every client read.

A snapshot is a thread's frames and their locals at one moment: an exception that failed a
task or a process (``reason`` ``"exception"``), or a snapshot point's hit (``"snapshot"``).
Nothing in it is a live object: each value is its type's name, a bounded ``repr`` and, for a
container or an object with attributes, its children to a bounded depth. That is all a
reader can show, and all that can travel or be stored.

The wire and disk form is :meth:`Snapshot.to_json`'s dict (JSON-serialisable: str, int,
float, bool, None, list, dict). :meth:`Snapshot.from_json` reads any dict a version of this
module wrote: unknown keys are ignored (a newer writer's), a missing optional key takes its
default, and a missing required key or a value of the wrong type raises
:class:`~raydebug.errors.SnapshotFormatError` naming it. ``format`` in the dict is
:data:`FORMAT_VERSION`; a change that a reader must know about raises it, anything else
stays backward compatible.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from ..errors import SnapshotFormatError

FORMAT_VERSION = 1
# A logpoint with this message is a snapshot point (raydebug break --snapshot, an IDE's
# logpoint): each hit is captured as a snapshot, never logged nor paused at.
SNAPSHOT_POINT_MESSAGE = "{snapshot}"
REASONS = ("exception", "snapshot")
Reason = Literal["exception", "snapshot"]


@dataclass(frozen=True)
class Value:
    """One captured value: a local, an item of a container or an attribute of an object.

    ``children`` is None for a leaf (a number, a string, anything not expanded) and a list
    (possibly empty) for a value whose parts were captured: a list's items named ``[0]``,
    a dict's named by the repr of their key (``['a']``), an object's attributes by name.
    ``truncated``: the capture left some of it out (more items than the width, deeper than
    the depth, a repr cut at its cap, or the snapshot's byte budget spent)."""

    name: str
    type_name: str
    repr: str
    children: list[Value] | None = None
    truncated: bool = False

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {"name": self.name, "type": self.type_name, "repr": self.repr}
        if self.children is not None:
            data["children"] = [child.to_json() for child in self.children]
        if self.truncated:
            data["truncated"] = True
        return data

    @classmethod
    def from_json(cls, data: Any) -> Value:
        _require_dict(data, "value")
        children = data.get("children")
        if children is not None:
            _require(isinstance(children, list), "value.children", "a list")
            children = [cls.from_json(child) for child in children]
        return cls(name=_text(data, "name", "value"), type_name=_text(data, "type", "value"),
                   repr=_text(data, "repr", "value"), children=children,
                   truncated=bool(data.get("truncated", False)))


@dataclass(frozen=True)
class FrameCapture:
    """One frame: where it was, its file's text (capped; None when unreadable) so that a
    client without the file can show it, and its locals in the frame's order."""

    function: str
    path: str
    line: int
    source: str | None = None
    locals: list[Value] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {"function": self.function, "path": self.path, "line": self.line,
                "source": self.source, "locals": [value.to_json() for value in self.locals]}

    @classmethod
    def from_json(cls, data: Any) -> FrameCapture:
        _require_dict(data, "frame")
        line = data.get("line")
        _require(isinstance(line, int) and not isinstance(line, bool), "frame.line",
                 "an integer")
        source = data.get("source")
        _require(source is None or isinstance(source, str), "frame.source", "text or null")
        values = data.get("locals", [])
        _require(isinstance(values, list), "frame.locals", "a list")
        return cls(function=_text(data, "function", "frame"), path=_text(data, "path", "frame"),
                   line=line, source=source, locals=[Value.from_json(v) for v in values])


@dataclass(frozen=True)
class ExceptionInfo:
    """The exception a failure snapshot is of: ``traceback_text`` is what Python prints."""

    type_name: str
    message: str
    traceback_text: str = ""

    def to_json(self) -> dict[str, Any]:
        return {"type": self.type_name, "message": self.message,
                "traceback": self.traceback_text}

    @classmethod
    def from_json(cls, data: Any) -> ExceptionInfo:
        _require_dict(data, "exception")
        traceback_text = data.get("traceback", "")
        _require(isinstance(traceback_text, str), "exception.traceback", "text")
        return cls(type_name=_text(data, "type", "exception"),
                   message=_text(data, "message", "exception"), traceback_text=traceback_text)


@dataclass(frozen=True)
class Snapshot:
    """One capture. ``id`` is unique in a hub (``x`` and hex digits, apart from sessions'
    and processes' ids); ``time`` when it was taken (epoch seconds); ``process`` the
    process's record as the hub lists it (``pid``, ``host``, ``labels``, ``job_id``,
    ``task_name``...: a dict, passed through); ``frames`` innermost first (the raising or
    hit frame is ``frames[0]``); ``exception`` only for ``reason == "exception"``."""

    id: str
    reason: Reason
    time: float
    process: dict[str, Any]
    thread_name: str
    exception: ExceptionInfo | None = None
    frames: list[FrameCapture] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {"format": FORMAT_VERSION, "id": self.id, "reason": self.reason,
                "time": self.time, "process": dict(self.process),
                "thread_name": self.thread_name,
                "exception": self.exception.to_json() if self.exception else None,
                "frames": [frame.to_json() for frame in self.frames]}

    @classmethod
    def from_json(cls, data: Any) -> Snapshot:
        _require_dict(data, "snapshot")
        version = data.get("format", FORMAT_VERSION)
        _require(isinstance(version, int) and version <= FORMAT_VERSION, "snapshot.format",
                 f"a format this version reads (<= {FORMAT_VERSION})")
        reason = data.get("reason")
        _require(reason in REASONS, "snapshot.reason", " or ".join(REASONS))
        moment = data.get("time")
        _require(isinstance(moment, (int, float)) and not isinstance(moment, bool),
                 "snapshot.time", "a number")
        process = data.get("process", {})
        _require(isinstance(process, dict), "snapshot.process", "an object")
        exception = data.get("exception")
        frames = data.get("frames", [])
        _require(isinstance(frames, list), "snapshot.frames", "a list")
        return cls(id=_text(data, "id", "snapshot"), reason=reason, time=float(moment),
                   process=process, thread_name=_text(data, "thread_name", "snapshot"),
                   exception=ExceptionInfo.from_json(exception) if exception else None,
                   frames=[FrameCapture.from_json(frame) for frame in frames])


def _require(ok: bool, name: str, what: str) -> None:
    if not ok:
        raise SnapshotFormatError(f"not a snapshot: {name} must be {what}")


def _require_dict(data: Any, name: str) -> None:
    _require(isinstance(data, dict), name, "an object")


def _text(data: dict[str, Any], key: str, owner: str) -> str:
    value = data.get(key)
    if not isinstance(value, str):
        raise SnapshotFormatError(f"not a snapshot: {owner}.{key} must be text")
    return value
