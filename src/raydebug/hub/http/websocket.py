"""A WebSocket on the client port, as the byte stream a DAP client connection reads.

Theory of operation. The browser is a DAP client like any IDE: each WebSocket text message
is one DAP message (its JSON, without the ``Content-Length`` header). Rather than a second
debugger path, :class:`WebSocketSocket` turns an accepted WebSocket (the HTTP side
answered the upgrade, see :mod:`.upgrade`) back into the stream a TCP client would
have sent: a pump reads frames (wsproto, sans-IO), checks each message is one JSON object
within :data:`MAX_MESSAGE` bytes, and feeds it framed (``Content-Length``) into an
:class:`asyncio.StreamReader`; the :class:`WebSocketWriter` cuts the hub's framed bytes
back into messages and sends each as a text frame.
:class:`~raydebug.hub.clients.handler.ClientHandler` serves that pair unchanged:
routing, the proxy policy and the client token all apply.

A message that is too large, not text, not a JSON object, or a frame that breaks the
protocol closes the WebSocket with a close code and a one-line reason. When the browser
sends faster than the hub reads, the pump stops reading its socket (the reader's own flow
control, through :class:`_PausingTransport`).
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from wsproto.connection import Connection, ConnectionState, ConnectionType
from wsproto.events import BytesMessage, CloseConnection, Ping, TextMessage
from wsproto.frame_protocol import CloseReason
from wsproto.utilities import LocalProtocolError as WsLocalProtocolError

from ...errors import RemoteProtocolError
from ...protocol.framing import Framer, NeedData, frame
from ..net import RECV_SIZE, ClientReader, peer_name

log = logging.getLogger("raydebug.hub")

MAX_MESSAGE = 16 * 1024 * 1024  # a setBreakpoints of a big file, a long evaluate
READER_LIMIT = 1024 * 1024  # buffered for the hub before the pump stops reading
CLOSE_TIMEOUT = 5.0

Serve = Callable[[asyncio.StreamReader, "WebSocketWriter"], Awaitable[Any]]


class WebSocketSocket:
    """One accepted WebSocket: the pump (browser -> hub) and the close."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                 trailing: bytes) -> None:
        self._socket_reader = reader
        self._socket_writer = writer
        self.connection = Connection(ConnectionType.SERVER)
        self._pending = trailing
        self._paused = _PausingTransport()
        self.reader = ClientReader(limit=READER_LIMIT)
        self.reader.set_transport(self._paused)
        self.writer = WebSocketWriter(self, writer)
        self.close_reason: str | None = None  # why the hub closed it, when it did

    async def run(self, serve: Serve) -> None:
        pump = asyncio.ensure_future(self._pump())
        try:
            await serve(self.reader, self.writer)
        finally:
            pump.cancel()
            await asyncio.gather(pump, return_exceptions=True)
            self.close(CloseReason.NORMAL_CLOSURE, "the hub closed the connection")
            try:
                await asyncio.wait_for(self._socket_writer.drain(), CLOSE_TIMEOUT)
            except (TimeoutError, OSError):
                pass

    def send_text(self, text: str) -> None:
        if self.connection.state is ConnectionState.OPEN:
            self._socket_writer.write(self.connection.send(TextMessage(data=text)))

    def close(self, code: int, reason: str) -> None:
        """Send a close frame (once); the browser's pending messages are dropped."""
        if self.connection.state in (ConnectionState.OPEN, ConnectionState.REMOTE_CLOSING):
            if self.close_reason is None and code != CloseReason.NORMAL_CLOSURE:
                self.close_reason = reason
                log.warning("client %s: WebSocket closed: %s", peer_name(self._socket_writer),
                            reason)
            try:
                self._socket_writer.write(self.connection.send(
                    CloseConnection(code=code, reason=reason[:120])))
            except WsLocalProtocolError:
                pass
        self.reader.feed_eof()  # the hub's side reads what was whole, then the end

    async def _pump(self) -> None:
        """Browser -> hub until the WebSocket closes: messages become framed DAP bytes."""
        message: list[str] = []
        size = 0
        data = self._pending or await self._socket_reader.read(RECV_SIZE)
        try:
            while True:
                if data:
                    self.connection.receive_data(data)
                else:
                    self.connection.receive_data(None)  # the socket's end: abnormal closure
                for event in self.connection.events():
                    if isinstance(event, TextMessage):
                        message.append(event.data)
                        size += len(event.data)
                        if size > MAX_MESSAGE:
                            self.close(CloseReason.MESSAGE_TOO_BIG,
                                       f"a message larger than {MAX_MESSAGE} bytes")
                            return
                        if event.message_finished:
                            body = self._checked("".join(message))
                            if body is None:
                                return
                            self.reader.feed_data(frame(body))
                            message, size = [], 0
                    elif isinstance(event, BytesMessage):
                        self.close(CloseReason.UNSUPPORTED_DATA,
                                   "DAP messages are text frames of JSON")
                        return
                    elif isinstance(event, Ping):
                        self._socket_writer.write(self.connection.send(event.response()))
                    elif isinstance(event, CloseConnection):
                        if event.code not in (CloseReason.NORMAL_CLOSURE,
                                              CloseReason.GOING_AWAY,
                                              CloseReason.NO_STATUS_RCVD,
                                              CloseReason.ABNORMAL_CLOSURE):
                            # wsproto's own verdict on a broken frame (its reason says why)
                            self.close(event.code, event.reason or "protocol error")
                        else:
                            self.close(CloseReason.NORMAL_CLOSURE, "goodbye")
                        return
                if not data:
                    return
                await self._paused.wait_resumed()
                data = await self._socket_reader.read(RECV_SIZE)
        except (OSError, WsLocalProtocolError):
            self.reader.feed_eof()
        except RemoteProtocolError as error:
            self.close(CloseReason.PROTOCOL_ERROR, str(error))

    def _checked(self, text: str) -> bytes | None:
        """The message's bytes when it is one JSON object; else None, after closing."""
        try:
            value = json.loads(text)
        except json.JSONDecodeError as error:
            self.close(CloseReason.INVALID_FRAME_PAYLOAD_DATA, f"not JSON: {error}")
            return None
        if not isinstance(value, dict):
            self.close(CloseReason.INVALID_FRAME_PAYLOAD_DATA,
                       "a DAP message is a JSON object")
            return None
        return text.encode()


class WebSocketWriter:
    """What :class:`~raydebug.hub.clients.stream.ClientStream` needs of an
    :class:`asyncio.StreamWriter`: framed DAP bytes in, one text message out per DAP
    message."""

    def __init__(self, socket: WebSocketSocket, writer: asyncio.StreamWriter) -> None:
        self._socket = socket
        self._writer = writer
        self._framer = Framer()

    def write(self, data: bytes) -> None:
        self._framer.receive_data(data)
        while not isinstance(body := self._framer.next_body(), NeedData):
            self._socket.send_text(body.decode("utf-8", "replace"))

    def is_closing(self) -> bool:
        return self._writer.is_closing() or \
            self._socket.connection.state is not ConnectionState.OPEN

    async def drain(self) -> None:
        await self._writer.drain()

    @property
    def transport(self) -> asyncio.WriteTransport:
        """The connection's transport (its write buffer holds the framed messages)."""
        return self._writer.transport

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return self._writer.get_extra_info(name, default)

    def close(self) -> None:
        self._socket.close(CloseReason.NORMAL_CLOSURE, "closed")


class _PausingTransport(asyncio.ReadTransport):
    """The flow control :class:`asyncio.StreamReader` asks of its transport, for the pump:
    the reader pauses it when the hub falls behind and resumes it once it has read."""

    def __init__(self) -> None:
        super().__init__()
        self._resumed = asyncio.Event()
        self._resumed.set()

    def pause_reading(self) -> None:
        self._resumed.clear()

    def resume_reading(self) -> None:
        self._resumed.set()

    def is_reading(self) -> bool:
        return self._resumed.is_set()

    async def wait_resumed(self) -> None:
        await self._resumed.wait()
