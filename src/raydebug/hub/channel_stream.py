"""A process's data channel, as DAP messages: the hub's side of pydevd's socket.

Theory of operation. The agent connects a data channel when a client asks for one (see
:class:`.workers.PendingChannels`); the client connection owns it from then until it calls
:meth:`ChannelStream.finish`, which also tells the worker listener it may let go of it.
Reading has two forms: :meth:`ChannelStream.next_message` for the channel's set-up (parsed;
None when it closed), :meth:`ChannelStream.next_body` for the relay (unparsed, so that most
of pydevd's messages pass as bytes).
"""

from __future__ import annotations

from ..errors import PeerClosed
from ..protocol import DapConnection, Message
from .net import read_next
from .worker_listener import DataChannel


class ChannelStream:
    """pydevd's DAP connection over one data channel."""

    def __init__(self, channel: DataChannel) -> None:
        self._channel = channel
        self._connection = DapConnection()
        if channel.leftover:
            self._connection.receive_data(channel.leftover)

    def send(self, message: Message) -> None:
        """Write ``message`` with its own ``seq`` (pydevd's side is never renumbered)."""
        self._channel.writer.write(self._connection.send(message))

    async def drain(self) -> None:
        """Wait until the written bytes have gone; raises OSError when the channel broke."""
        await self._channel.writer.drain()

    async def next_message(self) -> Message | None:
        """pydevd's next message; None when the channel has closed or broken. Raises
        :class:`~raydebug.errors.RemoteProtocolError` on malformed input."""
        try:
            return await read_next(self._channel.reader, self._connection.receive_data,
                                   self._connection.next_event)
        except OSError:
            return None

    async def next_body(self) -> bytes:
        """pydevd's next message body, unparsed; raises :class:`PeerClosed` at the channel's
        end, OSError when it broke."""
        body = await read_next(self._channel.reader, self._connection.receive_data,
                               self._connection.next_body)
        if body is None:
            raise PeerClosed
        return body

    @property
    def closing(self) -> bool:
        """True once the channel's socket is closed or closing (pydevd is out of reach)."""
        return self._channel.writer.is_closing()

    def close(self) -> None:
        """Close the socket (the process has gone); the relay then sees the channel end."""
        self._channel.writer.close()

    def finish(self) -> None:
        """Close the socket and hand the channel back to the worker listener: done with it."""
        self._channel.writer.close()
        self._channel.done.set()
