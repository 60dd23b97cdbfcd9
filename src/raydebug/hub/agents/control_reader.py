"""Reading an agent's control connection once its handshake is done: messages are parsed as
their bytes arrive and handed over in the order they came.

Why not a stream and a task: a hub asks 10,000 live processes what they run now for one
listing, and reads 10,000 answers. Through an ``asyncio.StreamReader`` each answer wakes
the connection's task (a future, a loop turn, a coroutine resumed through the reader), the
larger part of a listing's time (measured: docs/design.md#listing-10k). As a
:class:`asyncio.Protocol`, an answer is handled in the callback that received its bytes.

Order is kept: a message whose handling needs the loop (the handler returns an awaitable:
a session starting, a registration) is awaited by one task of this connection, and every
message after it waits behind it in :attr:`ControlReader.backlog`, so an answer never
overtakes the session that came before it. While the backlog is long, reading pauses (a
flood of messages cannot take the hub's memory).
"""

from __future__ import annotations

import asyncio
import collections
import logging
from collections.abc import Awaitable, Callable

from ...errors import RaydebugError
from ...protocol.control import ControlConnection, ControlMessage
from ...protocol.framing import NeedData

log = logging.getLogger("raydebug.hub")

# Messages waiting behind one being awaited, above which reading pauses until they are done.
PAUSE_READING_AT = 256

# What a connection's owner does with each message: nothing to wait for (None), or an
# awaitable that the messages after it wait for.
HandleMessage = Callable[[ControlMessage], Awaitable[None] | None]


class ControlReader(asyncio.Protocol):
    """The protocol of one control connection after its handshake (``set_protocol``).

    ``handler`` gets every message in order; an error it raises (:class:`RaydebugError`:
    a message that has no place here) or a malformed message closes the connection, logged
    with ``peer``; so does any other exception (a bug of ours: logged with its traceback and
    the type of the message it met), and the hub's other connections go on. :meth:`finished`
    returns once the connection is closed and the message being handled, if any, is done.
    """

    def __init__(self, transport: asyncio.Transport, stream: ControlConnection,
                 handler: HandleMessage, peer: str) -> None:
        self._transport = transport
        self._stream = stream
        self._handler = handler
        self._peer = peer
        self.backlog: collections.deque[ControlMessage] = collections.deque()
        self._waiting: asyncio.Task[None] | None = None  # handles the backlog, in order
        self._paused = False
        self._closed: asyncio.Future[None] = asyncio.get_running_loop().create_future()

    # -- asyncio.Protocol ---------------------------------------------------------------------

    def data_received(self, data: bytes) -> None:
        self._stream.receive_data(data)
        self._take_messages()

    def eof_received(self) -> bool | None:
        self._stream.receive_data(b"")
        self._take_messages()  # raises (logged) on a message cut short
        return None  # the transport closes

    def connection_lost(self, exc: Exception | None) -> None:
        self.backlog.clear()  # (what is being handled finishes: see finished())
        if not self._closed.done():
            self._closed.set_result(None)

    # -- the owner's side ---------------------------------------------------------------------

    def start(self) -> None:
        """Handle the messages ``stream`` holds already (they came with the handshake)."""
        self._take_messages()

    @property
    def closed(self) -> asyncio.Future[None]:
        """Done once the connection is closed."""
        return self._closed

    def close(self) -> None:
        self._transport.close()

    async def finished(self) -> None:
        """Return when the connection has closed and the message being handled, if any,
        is done (so the owner's cleanup comes after it: a session that was being added
        is then removed with its process, not left behind)."""
        await asyncio.shield(self._closed)
        if self._waiting is not None:
            await self._waiting

    # -- handling -----------------------------------------------------------------------------

    def _take_messages(self) -> None:
        try:
            while not self._transport.is_closing():
                message = self._stream.next_event()
                if isinstance(message, NeedData):
                    break
                if self._waiting is not None:
                    self.backlog.append(message)
                else:
                    self._handle(message)
        except RaydebugError as error:  # a malformed message
            self._fail(error)
            return
        if len(self.backlog) > PAUSE_READING_AT and not self._paused:
            self._paused = True
            self._transport.pause_reading()

    def _handle(self, message: ControlMessage) -> None:
        """Hand ``message`` over; when it must be awaited, the messages after it wait."""
        try:
            pending = self._handler(message)
        except RaydebugError as error:
            self._fail(error)
            return
        except Exception:  # a bug of ours: close this connection, keep serving the others
            self._fail_ours(message)
            return
        if pending is not None:
            self._waiting = asyncio.ensure_future(self._work_through(message, pending))

    async def _work_through(self, message: ControlMessage, pending: Awaitable[None]) -> None:
        """Await ``pending`` (``message``'s handling), then handle the backlog in order
        (awaiting what must be)."""
        try:
            await pending
            while self.backlog and not self._transport.is_closing():
                message = self.backlog.popleft()
                if self._paused and len(self.backlog) <= PAUSE_READING_AT // 2:
                    self._paused = False
                    self._transport.resume_reading()
                if (pending_next := self._handler(message)) is not None:
                    await pending_next
        except RaydebugError as error:
            self._fail(error)
        except Exception:  # a bug of ours: close this connection, keep serving the others
            self._fail_ours(message)
        finally:
            self._waiting = None  # (no message can arrive between the last check and here)

    def _fail_ours(self, message: ControlMessage) -> None:
        """Handling ``message`` raised what it should not have (a bug of ours: the
        exception being handled): log it with its traceback, close this connection."""
        log.exception("agent %s: unexpected error handling %r; connection closed",
                      self._peer, message.TYPE)
        self.backlog.clear()
        self.close()

    def _fail(self, error: RaydebugError) -> None:
        log.warning("agent %s: %s; connection closed", self._peer,
                    error or type(error).__name__)
        self.backlog.clear()
        self.close()
