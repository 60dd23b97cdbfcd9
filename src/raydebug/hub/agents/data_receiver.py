"""Receiving a data connection from pydevd: bodies framed in the callback their bytes came in.

Why not a stream and a task: every answer and event of pydevd crosses the hub on this
connection. Through an :class:`asyncio.StreamReader` each one took a loop turn and a task's
wake-up more, and each receive allocated asyncio's 256 KiB buffer afresh (an ``mmap``, an
``mremap`` and a ``munmap`` a message, with their page faults). As a
:class:`asyncio.BufferedProtocol` (set with ``set_protocol`` once the handshake is done, as
``control_reader`` does), bytes land in one buffer of this object's, and during the relay
each body goes to the client in the same callback (docs/design.md#per-step-costs).

Two ways to take bodies: :meth:`DataReceiver.next_body` for the connection's set-up
(awaited, in order); :meth:`DataReceiver.relay` hands each body to a function as it arrives,
until the connection ends. Reading pauses while bodies pile up untaken (set-up) or while the relay's
taker says it is backed up (its client reads slowly), so pydevd is slowed, not the hub's
memory filled.
"""

from __future__ import annotations

import asyncio
import collections
from collections.abc import Awaitable, Callable

from ...errors import PeerClosed
from ...protocol.framing import DEFAULT_MAX_BODY_SIZE, Framer, NeedData

BUFFER_SIZE = 64 * 1024  # one receive at most (below the allocator's mmap threshold)
PAUSE_READING_AT = 64  # bodies received and not taken yet (the set-up reads only a few)


class DataReceiver(asyncio.BufferedProtocol):
    """The protocol of one data connection after its handshake; ``leftover``: the bytes the
    handshake read past its end. Writing stays with the transport (its flow control is
    here: :meth:`wait_writable`)."""

    def __init__(self, transport: asyncio.Transport, leftover: bytes = b"") -> None:
        self._transport = transport
        self._buffer = bytearray(BUFFER_SIZE)
        self._view = memoryview(self._buffer)
        self._framer = Framer(max_body_size=DEFAULT_MAX_BODY_SIZE)
        self._bodies: collections.deque[bytes] = collections.deque()
        self._taker: Callable[[bytes], None] | None = None
        self._backed_up: Callable[[], bool] = lambda: False
        self._ended = False  # end of stream, or connection lost
        self._error: BaseException | None = None  # a malformed message, a broken connection
        self._wake: asyncio.Future[None] | None = None  # the one waiting for news
        self._paused = False  # reading, for a taker that is backed up or bodies untaken
        self._writable: asyncio.Future[None] | None = None  # while the transport's buffer is full
        if leftover:
            self._framer.receive_data(leftover)

    # -- asyncio.BufferedProtocol -------------------------------------------------------------

    def get_buffer(self, sizehint: int) -> memoryview:
        return self._view

    def buffer_updated(self, nbytes: int) -> None:
        self._framer.receive_data(bytes(self._view[:nbytes]))
        self._take_bodies()

    def eof_received(self) -> bool | None:
        self._framer.receive_data(b"")
        self._take_bodies()  # a message cut short is an error
        self._end(None)
        return None  # the transport closes

    def connection_lost(self, exc: Exception | None) -> None:
        self._end(exc)
        if self._writable is not None and not self._writable.done():
            self._writable.set_result(None)  # wait_writable then raises

    def pause_writing(self) -> None:
        if self._writable is None or self._writable.done():
            self._writable = asyncio.get_running_loop().create_future()

    def resume_writing(self) -> None:
        if self._writable is not None and not self._writable.done():
            self._writable.set_result(None)

    # -- the owner's side ---------------------------------------------------------------------

    async def next_body(self) -> bytes:
        """The next body, in order; raises :class:`PeerClosed` at the connection's end (every
        body received before it taken), OSError when it broke, and
        :class:`~raydebug.errors.RemoteProtocolError` on a malformed message."""
        while not self._bodies:
            self._raise_if_over()
            await self._wait()
        body = self._bodies.popleft()
        if self._paused and len(self._bodies) < PAUSE_READING_AT // 2:
            self._resume()
        return body

    async def relay(self, take: Callable[[bytes], None], backed_up: Callable[[], bool],
                    wait_taken: Callable[[], Awaitable[object]]) -> None:
        """Hand every body to ``take`` as it arrives (those received already first), in
        the callback that received it, until the connection ends: then return (PeerClosed or
        a broken connection), or raise what ``take`` or the framing raised. After the bodies
        of each receive, when ``backed_up()``, reading pauses until ``await wait_taken()``
        returns."""
        while self._bodies:
            take(self._bodies.popleft())
        self._taker, self._backed_up = take, backed_up
        try:
            while True:
                try:
                    self._raise_if_over()
                except (PeerClosed, OSError):
                    return
                if self._paused:
                    await wait_taken()
                    self._resume()
                else:
                    await self._wait()
        finally:
            self._taker = None

    async def wait_writable(self) -> None:
        """Return when the transport takes more bytes; raises ConnectionResetError once the
        connection is lost (as :meth:`asyncio.StreamWriter.drain`)."""
        if self._ended:
            raise ConnectionResetError("the data connection is closed")
        if self._writable is not None and not self._writable.done():
            await self._writable
            if self._ended:
                raise ConnectionResetError("the data connection is closed")

    # -- inside ---------------------------------------------------------------------------------

    def _take_bodies(self) -> None:
        try:
            while not isinstance(body := self._framer.next_body(), NeedData):
                if self._taker is not None:
                    self._taker(body)
                else:
                    self._bodies.append(body)
        except Exception as error:  # malformed input, or the taker's error: the relay ends
            self._error = error
            self._transport.close()
            self._notify()
            return
        if self._taker is not None:
            if self._backed_up():
                self._pause()
        elif len(self._bodies) >= PAUSE_READING_AT:
            self._pause()
        if self._bodies:
            self._notify()

    def _end(self, exc: Exception | None) -> None:
        self._ended = True
        if exc is not None and self._error is None:
            self._error = exc
        self._notify()

    def _raise_if_over(self) -> None:
        if self._error is not None:
            raise self._error
        if self._ended:
            raise PeerClosed

    def _pause(self) -> None:
        if not self._paused:
            self._paused = True
            self._transport.pause_reading()
            self._notify()

    def _resume(self) -> None:
        if self._paused:
            self._paused = False
            if not self._transport.is_closing():
                self._transport.resume_reading()

    async def _wait(self) -> None:
        self._wake = asyncio.get_running_loop().create_future()
        try:
            await self._wake
        finally:
            self._wake = None

    def _notify(self) -> None:
        if self._wake is not None and not self._wake.done():
            self._wake.set_result(None)
