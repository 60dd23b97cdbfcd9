"""One DAP client's byte stream, as messages: the hub's only reader and writer of it.

Theory of operation. The hub reads the client's messages (always parsed: they are few, and
each request is noted until its answer) and writes three kinds: its own, numbered by the
hub's side of the connection (:meth:`ClientStream.send`); pydevd's, forwarded with their own
``seq`` and bytes (``forwarded=True``); and pydevd's unparsed bodies on the relay's fast path
(:meth:`ClientStream.send_body`). Writes never block and never raise: once the client's
socket is closing they are dropped, and :meth:`ClientStream.drain` swallows OSError where the
caller does not care that the client has gone.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from typing import Any, cast

from ...errors import PeerClosed
from ...protocol import DapConnection, Event, Message, Request
from ...protocol.framing import NeedData
from ...protocol.proxy_policy import failure, success
from ..net import RECV_SIZE, ClientReader, peer_host, read_next


class _DivertedClient:
    """:meth:`ClientStream.relay` with the hub's own reader: the callback side (``receive``)
    takes each message as its bytes arrive; :meth:`run` waits for the end, and for the taker
    while it is backed up (the client's reading paused meanwhile)."""

    def __init__(self, reader: ClientReader, connection: DapConnection,
                 take: Callable[[Message], None], backed_up: Callable[[], bool]) -> None:
        self._reader = reader
        self._connection = connection
        self._take = take
        self._backed_up = backed_up
        self._ended = False
        self._error: BaseException | None = None
        self._paused = False
        self._wake: asyncio.Future[None] | None = None

    async def run(self, wait_taken: Callable[[], Awaitable[object]]) -> None:
        self._take_received()  # what the stream read before: first
        self._reader.divert(self._receive)
        self._pause_if_backed_up()
        try:
            while True:
                if self._error is not None:
                    raise self._error
                if self._ended:
                    broken = self._reader.exception()
                    if broken is not None:
                        raise broken
                    return
                if self._paused:
                    await wait_taken()
                    self._paused = False
                    self._reader.resume_feeding()
                    continue
                self._wake = asyncio.get_running_loop().create_future()
                try:
                    await self._wake
                finally:
                    self._wake = None
        finally:
            self._reader.undivert()
            if self._paused:
                self._reader.resume_feeding()

    def _receive(self, data: bytes) -> None:
        """The reader's callback: ``data`` received (``b""``: the end)."""
        if self._ended or self._error is not None:
            return
        self._connection.receive_data(data)
        self._take_received()
        if not data and self._error is None:
            self._ended = True
            self._wake_up()
        else:
            self._pause_if_backed_up()

    def _pause_if_backed_up(self) -> None:
        if not self._paused and self._error is None and self._backed_up():
            self._paused = True
            self._reader.pause_feeding()
            self._wake_up()

    def _take_received(self) -> None:
        """Take every whole message received; a malformed one, or the taker's error, ends
        the relay."""
        try:
            while not isinstance(message := self._connection.next_event(), NeedData):
                self._take(message)
        except Exception as error:
            self._error = error
            self._wake_up()

    def _wake_up(self) -> None:
        if self._wake is not None and not self._wake.done():
            self._wake.set_result(None)


class ClientStream:
    """A client's DAP connection over an asyncio stream (implements
    :class:`.peer.ClientPeer`)."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                 first_bytes: bytes) -> None:
        self._reader = reader
        self._writer = writer
        self._connection = DapConnection()
        self._connection.receive_data(first_bytes)

    async def next_client_message(self) -> Message:
        """The client's next message; raises :class:`PeerClosed` when it has gone."""
        message = await read_next(self._reader, self._connection.receive_data,
                                  self._connection.next_event)
        if message is None:
            raise PeerClosed
        return cast(Message, message)  # mypy cannot solve T for a union

    async def relay(self, take: Callable[[Message], None], backed_up: Callable[[], bool],
                    wait_taken: Callable[[], Awaitable[object]]) -> None:
        """Hand each of the client's messages to ``take``, those received already first,
        until the client leaves: then return. Raises
        :class:`~raydebug.errors.RemoteProtocolError` on malformed input, OSError when the
        connection broke, and what ``take`` raised. After the messages of each receive, when
        ``backed_up()``, reading pauses until ``await wait_taken()`` returns.

        With the hub's own reader (:class:`~raydebug.hub.net.ClientReader`) each message is
        taken in the callback that received its bytes; with another (a test's), one a loop
        turn. Cancelled, the client's bytes not yet taken stay for
        :meth:`next_client_message`."""
        if not isinstance(self._reader, ClientReader):
            while True:
                try:
                    take(await self.next_client_message())
                except PeerClosed:
                    return
                if backed_up():
                    await wait_taken()
        await _DivertedClient(self._reader, self._connection, take, backed_up).run(wait_taken)

    async def until_client_gone(self, waiting: Any) -> Any:
        """Await ``waiting`` unless the client leaves first (then raise :class:`PeerClosed`).
        What the client sends meanwhile is kept, to be read after."""
        wait_task = asyncio.ensure_future(waiting)
        read_task = asyncio.ensure_future(self._reader.read(RECV_SIZE))
        try:
            while True:
                await asyncio.wait({wait_task, read_task}, return_when=asyncio.FIRST_COMPLETED)
                if wait_task.done():
                    return wait_task.result()
                data = read_task.result()
                if not data:
                    raise PeerClosed
                self._connection.receive_data(data)  # kept for after the attach
                read_task = asyncio.ensure_future(self._reader.read(RECV_SIZE))
        finally:
            for task in (wait_task, read_task):
                task.cancel()

    def send(self, message: Message, *, forwarded: bool = False) -> None:
        """Write ``message``: the hub's own (numbered here), or pydevd's (``forwarded``)."""
        if not self._writer.is_closing():
            self._writer.write(self._connection.send(message, renumber=not forwarded))

    def send_body(self, body: bytes) -> None:
        """Write a body pydevd sent, unparsed (the relay's fast path)."""
        self._writer.write(self._connection.send_body(body))

    async def drain(self) -> None:
        """Wait until the written bytes have gone; raises OSError when the client has."""
        await self._writer.drain()

    def backed_up(self) -> bool:
        """Whether written bytes wait beyond the transport's high-water mark (the client
        reads slowly: :meth:`drain` would wait)."""
        transport = self._writer.transport
        return transport.get_write_buffer_size() > transport.get_write_buffer_limits()[1]

    async def drain_quietly(self) -> None:
        """Like :meth:`drain`, for when it does not matter whether the client is there."""
        with contextlib.suppress(OSError):
            await self._writer.drain()

    # -- ClientPeer -------------------------------------------------------------------------

    @property
    def peer_host(self) -> str | None:
        """The client's IP address; None on a Unix socket."""
        return peer_host(self._writer)

    def respond(self, request: Request, body: dict[str, Any] | None = None) -> None:
        self.send(success(request, body))

    def fail(self, request: Request, text: str) -> None:
        self.send(failure(request, text))

    def send_event(self, event: Event) -> None:
        self.send(event)

    def send_request(self, request: Request) -> None:
        """A reverse request to the client (its response is read and ignored)."""
        self.send(request)

    def say_now(self, text: str) -> None:
        """A line on the client's debug console, without waiting for it to be sent."""
        self.send(Event(seq=0, event="output",
                        body={"category": "console", "output": text + "\n"}))

    async def say(self, text: str) -> None:
        """A line on the client's debug console, sent before returning (if it can be)."""
        self.say_now(text)
        await self.drain_quietly()
