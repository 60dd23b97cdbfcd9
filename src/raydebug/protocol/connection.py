"""A sans-IO DAP endpoint in the style of h11's ``Connection``.

Three verbs: :meth:`DapConnection.receive_data` (``b""`` is EOF),
:meth:`DapConnection.next_event` (a message or :data:`NEED_DATA`), and
:meth:`DapConnection.send` (a message in, bytes to write out). It numbers outgoing
messages itself when asked to, so hub-made messages never reuse a peer's ``seq``.
"""

from __future__ import annotations

from dataclasses import replace

from .framing import DEFAULT_MAX_BODY_SIZE, NEED_DATA, Framer, NeedData, frame
from .messages import Message, encode_message, parse_message


def mentions(body: bytes, words: tuple[bytes, ...]) -> bool:
    """Cheap pre-check: could ``body`` be a message the caller must parse and inspect?"""
    return any(word in body for word in words)


class DapConnection:
    """One side of one DAP byte stream; holds no socket."""

    def __init__(self, max_body_size: int = DEFAULT_MAX_BODY_SIZE) -> None:
        self._framer = Framer(max_body_size=max_body_size)
        self._max_body_size = max_body_size
        self._next_seq = 1

    def receive_data(self, data: bytes) -> None:
        """Feed bytes received from the peer; ``b""`` when it closed its side."""
        self._framer.receive_data(data)

    def next_event(self) -> Message | NeedData:
        """Return the next whole message, or :data:`NEED_DATA`.

        Raises :class:`~raydebug.errors.RemoteProtocolError` on malformed input; the
        connection is then unusable.
        """
        body = self._framer.next_body()
        if body is NEED_DATA:
            return NEED_DATA
        assert isinstance(body, bytes)
        return parse_message(body)

    def next_body(self) -> bytes | NeedData:
        """Like :meth:`next_event` but without parsing: for relays that only look inside
        the messages that may concern them (see :func:`mentions`)."""
        return self._framer.next_body()

    def send_body(self, body: bytes) -> bytes:
        """Frame a body received (unparsed) from the other side of a relay."""
        return frame(body, self._max_body_size)

    def send(self, message: Message, *, renumber: bool = False) -> bytes:
        """Return the framed bytes of ``message``.

        With ``renumber`` the message gets this connection's next ``seq`` (for messages the
        hub makes up itself); otherwise it keeps its own and, when it was parsed from a peer,
        is forwarded byte for byte.
        """
        if renumber:
            message = replace(message, seq=self._next_seq, raw=None)
            self._next_seq += 1
        body = message.raw if message.raw is not None else encode_message(message)
        return frame(body, self._max_body_size)

    @property
    def at_eof(self) -> bool:
        """True once the peer closed its side."""
        return self._framer.at_eof
