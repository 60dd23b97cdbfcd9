"""A process's data connection, as DAP messages: the hub's side of pydevd's socket.

Theory of operation. The agent opens a data connection when a client asks for one (see
:class:`.data_connections.PendingDataConnections`); the client connection owns it from then
until it calls :meth:`DataStream.finish`, which also tells the agent listener it may let go
of it. Reading has two forms: :meth:`DataStream.next_message` for the connection's set-up
(parsed; None when it closed), :meth:`DataStream.relay` for the relay (unparsed bodies,
handed over as they arrive, so that most of pydevd's messages pass as bytes: see
:mod:`.data_receiver`).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from ...errors import PeerClosed
from ...protocol import DapConnection, Message
from ...protocol.messages import parse_message
from .data_connections import DataConnection


class DataStream:
    """pydevd's DAP messages over one data connection."""

    def __init__(self, connection: DataConnection) -> None:
        self._data = connection
        self._connection = DapConnection()

    def send(self, message: Message) -> None:
        """Write ``message`` with its own ``seq`` (pydevd's side is never renumbered)."""
        self._data.transport.write(self._connection.send(message))
        self._data.answer_due()

    async def drain(self) -> None:
        """Wait until the written bytes have gone; raises OSError when the connection broke."""
        await self._data.receiver.wait_writable()

    def backed_up(self) -> bool:
        """Whether written bytes wait beyond the transport's high-water mark (pydevd reads
        slowly: :meth:`drain` would wait)."""
        transport = self._data.transport
        return transport.get_write_buffer_size() > transport.get_write_buffer_limits()[1]

    async def next_message(self) -> Message | None:
        """pydevd's next message; None when the connection has closed or broken. Raises
        :class:`~raydebug.errors.RemoteProtocolError` on malformed input."""
        try:
            return parse_message(await self._data.receiver.next_body())
        except (PeerClosed, OSError):
            return None

    async def relay(self, take: Callable[[bytes], None], backed_up: Callable[[], bool],
                    wait_taken: Callable[[], Awaitable[object]]) -> None:
        """Hand each of pydevd's message bodies to ``take``, unparsed, as it arrives, until
        the connection ends (see :meth:`.DataReceiver.relay`: ``backed_up`` and
        ``wait_taken`` slow pydevd down to what the taker can pass on). Raises
        :class:`~raydebug.errors.RemoteProtocolError` on malformed input, and what ``take``
        raised."""
        await self._data.receiver.relay(take, backed_up, wait_taken)

    @property
    def closing(self) -> bool:
        """True once the connection's socket is closed or closing (pydevd is out of reach)."""
        return self._data.transport.is_closing()

    def close(self) -> None:
        """Close the socket (the process has gone); the relay then sees the connection end."""
        self._data.transport.close()

    def finish(self) -> None:
        """Close the socket and hand the connection back to the agent listener: done with
        it."""
        self._data.transport.close()
        self._data.done.set()
