"""A small blocking WebSocket client (wsproto on a socket) for the tests of the hub's
``/dap`` WebSocket: DAP messages as text frames, or raw frames for the fuzz tests."""

from __future__ import annotations

import json
import socket
from typing import Any

from wsproto import WSConnection
from wsproto.connection import ConnectionType
from wsproto.events import (
    AcceptConnection,
    BytesMessage,
    CloseConnection,
    Event,
    RejectConnection,
    RejectData,
    Request,
    TextMessage,
)

TIMEOUT = 30.0


class Refused(Exception):
    def __init__(self, status: int, body: bytes) -> None:
        super().__init__(f"HTTP {status}: {body!r}")
        self.status = status
        self.body = body


class WebSocketClient:
    def __init__(self, address: tuple[str, int], *, path: str = "/dap",
                 origin: str | None = None, cookie: str | None = None,
                 timeout: float = TIMEOUT) -> None:
        self.sock = socket.create_connection(address, timeout=timeout)
        self.ws = WSConnection(ConnectionType.CLIENT)
        extra: list[tuple[bytes, bytes]] = []
        if origin:
            extra.append((b"Origin", origin.encode()))
        if cookie:
            extra.append((b"Cookie", cookie.encode()))
        self.sock.sendall(self.ws.send(Request(host="{}:{}".format(*address), target=path,
                                               extra_headers=extra)))
        self.closed: CloseConnection | None = None
        self.received: list[dict[str, Any]] = []
        self._seq = 0
        reject: tuple[int, bytes] | None = None
        while True:
            event = self._next_event()
            if isinstance(event, AcceptConnection):
                return
            if isinstance(event, RejectConnection):
                reject = (event.status_code, b"")
                if not event.has_body:
                    break
            elif isinstance(event, RejectData):
                assert reject is not None
                reject = (reject[0], reject[1] + event.data)
                if event.body_finished:
                    break
        self.sock.close()
        assert reject is not None
        raise Refused(*reject)

    def _next_event(self) -> Event:
        while True:
            for event in self.ws.events():
                return event
            data = self.sock.recv(65536)
            self.ws.receive_data(data or None)

    def send_raw(self, data: bytes) -> None:
        self.sock.sendall(data)

    def send_text(self, text: str) -> None:
        self.sock.sendall(self.ws.send(TextMessage(data=text)))

    def send_bytes(self, data: bytes) -> None:
        self.sock.sendall(self.ws.send(BytesMessage(data=data)))

    def next_message(self) -> dict[str, Any] | None:
        """The next DAP message; None once the hub has closed (see ``closed``)."""
        parts: list[str] = []
        while True:
            event = self._next_event()
            if isinstance(event, TextMessage):
                parts.append(event.data)
                if event.message_finished:
                    message: dict[str, Any] = json.loads("".join(parts))
                    return message
            elif isinstance(event, CloseConnection):
                self.closed = event
                return None

    def request(self, command: str, arguments: dict[str, Any] | None = None) -> int:
        self._seq += 1
        self.send_text(json.dumps({"seq": self._seq, "type": "request", "command": command,
                                   "arguments": arguments or {}}))
        return self._seq

    def wait(self, kind: str, name: str, seq: int | None = None) -> dict[str, Any]:
        """The first response to ``seq`` (``kind="response"``) or event ``name`` received
        (earlier messages are kept for later waits)."""
        def wanted(message: dict[str, Any]) -> bool:
            if kind == "event":
                return message.get("event") == name
            return message.get("type") == "response" and message.get("request_seq") == seq

        while True:
            for message in self.received:
                if wanted(message):
                    self.received.remove(message)
                    return message
            received = self.next_message()
            if received is None:
                raise ConnectionError(f"closed while waiting for {name}: {self.closed}")
            self.received.append(received)

    def call(self, command: str, arguments: dict[str, Any] | None = None) -> dict[str, Any]:
        return self.wait("response", command, self.request(command, arguments))

    def close(self) -> None:
        self.sock.close()
