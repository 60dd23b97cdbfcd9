"""A process's data channel, as DAP messages: the hub's side of pydevd's socket.

Theory of operation. The agent connects a data channel when a client asks for one (see
:class:`.workers.PendingChannels`); the client connection owns it from then until it calls
:meth:`ChannelStream.finish`, which also tells the worker listener it may let go of it.
Reading has two forms: :meth:`ChannelStream.next_message` for the channel's set-up (parsed;
None when it closed), :meth:`ChannelStream.relay` for the relay (unparsed bodies, handed
over as they arrive, so that most of pydevd's messages pass as bytes: see
:mod:`.data_receiver`).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from ...errors import PeerClosed
from ...protocol import DapConnection, Message
from ...protocol.messages import parse_message
from .listener import DataChannel


class ChannelStream:
    """pydevd's DAP connection over one data channel."""

    def __init__(self, channel: DataChannel) -> None:
        self._channel = channel
        self._connection = DapConnection()

    def send(self, message: Message) -> None:
        """Write ``message`` with its own ``seq`` (pydevd's side is never renumbered)."""
        self._channel.transport.write(self._connection.send(message))

    async def drain(self) -> None:
        """Wait until the written bytes have gone; raises OSError when the channel broke."""
        await self._channel.receiver.wait_writable()

    async def next_message(self) -> Message | None:
        """pydevd's next message; None when the channel has closed or broken. Raises
        :class:`~raydebug.errors.RemoteProtocolError` on malformed input."""
        try:
            return parse_message(await self._channel.receiver.next_body())
        except (PeerClosed, OSError):
            return None

    async def relay(self, take: Callable[[bytes], None], backed_up: Callable[[], bool],
                    wait_taken: Callable[[], Awaitable[object]]) -> None:
        """Hand each of pydevd's message bodies to ``take``, unparsed, as it arrives, until
        the channel ends (see :meth:`.ChannelReceiver.relay`: ``backed_up`` and
        ``wait_taken`` slow pydevd down to what the taker can pass on). Raises
        :class:`~raydebug.errors.RemoteProtocolError` on malformed input, and what ``take``
        raised."""
        await self._channel.receiver.relay(take, backed_up, wait_taken)

    @property
    def closing(self) -> bool:
        """True once the channel's socket is closed or closing (pydevd is out of reach)."""
        return self._channel.transport.is_closing()

    def close(self) -> None:
        """Close the socket (the process has gone); the relay then sees the channel end."""
        self._channel.transport.close()

    def finish(self) -> None:
        """Close the socket and hand the channel back to the worker listener: done with it."""
        self._channel.transport.close()
        self._channel.done.set()
