"""DAP messages as frozen dataclasses (DAP specification, "Base protocol").

Payloads we do not interpret stay plain dicts with DAP's own spellings (``threadId``,
``configurationDone``) so that code greps against the specification. A parsed message keeps
the exact bytes it came from in ``raw``, so a proxy can forward it without re-encoding.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from ..errors import LocalProtocolError, RemoteProtocolError

JsonDict = dict[str, Any]


@dataclass(frozen=True)
class Request:
    """A request: from a client to a debuggee, or a reverse request the other way."""

    seq: int
    command: str
    arguments: JsonDict = field(default_factory=dict)
    raw: bytes | None = field(default=None, compare=False, repr=False)

    def to_dict(self) -> JsonDict:
        # Always sent, even empty: pydevd refuses an attach request without it.
        return {"seq": self.seq, "type": "request", "command": self.command,
                "arguments": self.arguments}


@dataclass(frozen=True)
class Response:
    """The answer to the request whose ``seq`` is ``request_seq``."""

    seq: int
    request_seq: int
    command: str
    success: bool = True
    message: str | None = None
    body: JsonDict = field(default_factory=dict)
    raw: bytes | None = field(default=None, compare=False, repr=False)

    def to_dict(self) -> JsonDict:
        message: JsonDict = {
            "seq": self.seq,
            "type": "response",
            "request_seq": self.request_seq,
            "command": self.command,
            "success": self.success,
        }
        if self.message is not None:
            message["message"] = self.message
        if self.body:
            message["body"] = self.body
        return message


@dataclass(frozen=True)
class Event:
    """A notification, such as ``stopped`` or ``output``."""

    seq: int
    event: str
    body: JsonDict = field(default_factory=dict)
    raw: bytes | None = field(default=None, compare=False, repr=False)

    def to_dict(self) -> JsonDict:
        message: JsonDict = {"seq": self.seq, "type": "event", "event": self.event}
        if self.body:
            message["body"] = self.body
        return message


Message = Request | Response | Event


def encode_message(message: Message) -> bytes:
    """Return the JSON body of ``message`` (without framing)."""
    try:
        return json.dumps(message.to_dict(), separators=(",", ":")).encode()
    except (TypeError, ValueError) as error:
        raise LocalProtocolError(f"cannot encode {type(message).__name__}: {error}") from error


def parse_message(body: bytes) -> Message:
    """Parse one message body; raises :class:`RemoteProtocolError` when it is not DAP."""
    try:
        data = json.loads(body)
    except (UnicodeDecodeError, ValueError) as error:
        raise RemoteProtocolError(f"message is not valid JSON: {error}") from error
    if not isinstance(data, dict):
        raise RemoteProtocolError("message is not a JSON object")
    kind = data.get("type")
    seq = _field(data, "seq", int)
    if kind == "request":
        return Request(
            seq=seq,
            command=_field(data, "command", str),
            arguments=_optional_dict(data, "arguments"),
            raw=body,
        )
    if kind == "response":
        message = data.get("message")
        return Response(
            seq=seq,
            request_seq=_field(data, "request_seq", int),
            command=_field(data, "command", str),
            success=_field(data, "success", bool),
            message=message if isinstance(message, str) else None,
            body=_optional_dict(data, "body"),
            raw=body,
        )
    if kind == "event":
        return Event(seq=seq, event=_field(data, "event", str), body=_optional_dict(data, "body"),
                     raw=body)
    raise RemoteProtocolError(f"unknown message type {kind!r}")


def _field(data: JsonDict, name: str, kind: type) -> Any:
    value = data.get(name)
    # bool is an int in Python; a seq of True is still not a number in JSON.
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        raise RemoteProtocolError(f"message field {name!r} must be a {kind.__name__}")
    return value


def _optional_dict(data: JsonDict, name: str) -> JsonDict:
    value = data.get(name)
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise RemoteProtocolError(f"message field {name!r} must be an object")
    return value
