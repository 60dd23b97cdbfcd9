"""One HTTP request and its answer: h11 (sans-IO) on the client's asyncio stream.

One request per connection: every answer says ``Connection: close`` and has a
``Content-Length``. The head is bounded in size (:data:`MAX_REQUEST_HEAD`), a body in size
(:data:`MAX_REQUEST_BODY`); the caller bounds both in time (:data:`HEAD_TIMEOUT`). Every
answer carries :data:`SECURITY_HEADERS`, a strict Content-Security-Policy among them, and
never a CORS header.
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass
from http import HTTPStatus
from typing import Any
from urllib.parse import parse_qsl

import h11

from ..net import RECV_SIZE

MAX_REQUEST_HEAD = 16 * 1024
MAX_REQUEST_BODY = 64 * 1024
HEAD_TIMEOUT = 10.0

# Scripts, styles and connections (fetch and WebSocket: CSP 3 matches ws: to 'self') come
# from the hub only; nothing inline, no frames, no forms elsewhere.
CONTENT_SECURITY_POLICY = ("default-src 'self'; script-src 'self'; style-src 'self'; "
                           "img-src 'self' data:; connect-src 'self'; object-src 'none'; "
                           "base-uri 'none'; frame-ancestors 'none'; form-action 'self'")
SECURITY_HEADERS = (
    ("Content-Security-Policy", CONTENT_SECURITY_POLICY),
    ("X-Content-Type-Options", "nosniff"),
    ("Referrer-Policy", "no-referrer"),
    ("Cache-Control", "no-store"),
)

Query = dict[str, str]


@dataclass(frozen=True)
class HttpRequest:
    """One request's head, decoded: what the checks and the routes look at."""

    method: str
    path: str
    query: Query
    version: str
    headers: list[tuple[str, str]]  # (lowercased name, value), in order

    @classmethod
    def from_h11(cls, event: h11.Request) -> HttpRequest:
        target = event.target.decode("latin-1")
        path, _, query_text = target.partition("?")
        return cls(event.method.decode("latin-1"), path, dict(parse_qsl(query_text)),
                   "HTTP/" + event.http_version.decode("latin-1"),
                   [(name.decode("latin-1").lower(), value.decode("latin-1"))
                    for name, value in event.headers])

    def header(self, name: str) -> str | None:
        return next((value for key, value in self.headers if key == name), None)

    def wants_websocket(self) -> bool:
        upgrade = (self.header("upgrade") or "").lower()
        return upgrade == "websocket" and "upgrade" in (self.header("connection") or "").lower()


class HttpExchange:
    """One HTTP request and its answer over h11 on an asyncio stream."""

    def __init__(self, first_bytes: bytes, reader: asyncio.StreamReader,
                 writer: asyncio.StreamWriter) -> None:
        self.reader = reader
        self.writer = writer
        self.connection = h11.Connection(h11.SERVER, max_incomplete_event_size=MAX_REQUEST_HEAD)
        self.connection.receive_data(first_bytes)

    async def next_event(self) -> Any:
        """The next h11 event other than NEED_DATA (PAUSED after an upgrade request).
        Raises h11.RemoteProtocolError on malformed input or an early end of stream."""
        while True:
            event = self.connection.next_event()
            if event is not h11.NEED_DATA:
                return event
            self.connection.receive_data(await self.reader.read(RECV_SIZE))

    async def read_body(self, limit: int) -> bytes:
        """The request's body, at most ``limit`` bytes; raises ValueError when larger."""
        body = bytearray()
        while True:
            event = await self.next_event()
            if isinstance(event, h11.Data):
                body += event.data
                if len(body) > limit:
                    raise ValueError(f"request body larger than {limit} bytes")
            elif isinstance(event, h11.EndOfMessage):
                return bytes(body)
            else:
                raise ValueError("the request ended before its body")

    async def read_json_body(self) -> Any:
        """The request's body as JSON (None when empty), within :data:`MAX_REQUEST_BODY`
        and :data:`HEAD_TIMEOUT`. Raises TimeoutError, ValueError (too large, not JSON) or
        h11.RemoteProtocolError."""
        body = await asyncio.wait_for(self.read_body(MAX_REQUEST_BODY), HEAD_TIMEOUT)
        if not body:
            return None
        try:
            return json.loads(body)
        except (UnicodeDecodeError, json.JSONDecodeError) as error:
            raise ValueError(f"the request body is not JSON: {error}") from None

    def answer(self, status: HTTPStatus, payload: Any = None, *, body: bytes | None = None,
               content_type: str = "application/json", head_only: bool = False,
               headers: tuple[tuple[str, str], ...] = ()) -> None:
        """Write the whole answer (no waiting: the caller drains). A connection whose
        request could not be parsed is answered all the same."""
        data = json.dumps(payload).encode() if body is None else body
        all_headers = [("Content-Type", content_type), ("Content-Length", str(len(data))),
                       ("Connection", "close"), *SECURITY_HEADERS, *headers]
        if self.connection.our_state not in (h11.IDLE, h11.SEND_RESPONSE):
            return  # already answered
        unparsed = self.connection.their_state in (h11.ERROR, h11.IDLE)
        if (unparsed and self.connection.our_state is h11.IDLE) or \
                self.connection.their_state is h11.ERROR:
            # h11 answers only a request it parsed; the head of this one never was.
            self.writer.write(_raw_answer(status, all_headers, b"" if head_only else data))
            return
        self.writer.write(self.connection.send(h11.Response(
            status_code=status.value, reason=status.phrase.encode(), headers=all_headers)))
        if not head_only:
            self.writer.write(self.connection.send(h11.Data(data=data)) or b"")
        self.writer.write(self.connection.send(h11.EndOfMessage()) or b"")


def _raw_answer(status: HTTPStatus, headers: list[tuple[str, str]], body: bytes) -> bytes:
    lines = [f"HTTP/1.1 {status.value} {status.phrase}"]
    lines += [f"{name}: {value}" for name, value in headers]
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body


def respond(writer: asyncio.StreamWriter, status: HTTPStatus, payload: Any) -> None:
    """Answer a request the hub will not read (a refused connection) with ``payload``."""
    body = json.dumps(payload).encode()
    writer.write(_raw_answer(status, [
        ("Content-Type", "application/json"), ("Content-Length", str(len(body))),
        ("Connection", "close"), *SECURITY_HEADERS], body))
