"""Content-Length framing, the wire format of DAP (and of the link's control connection).

Each message is ``Content-Length: N\\r\\n\\r\\n`` followed by N bytes of UTF-8 JSON
(DAP specification, "Base protocol"). :class:`Framer` is a sans-IO receive buffer: feed it
bytes with :meth:`Framer.receive_data`, take whole bodies out with :meth:`Framer.next_body`.
It never allocates more than its bounds allow: a header longer than ``max_header_size`` or a
body announced larger than ``max_body_size`` is refused as soon as it is seen, before its
bytes arrive.
"""

from __future__ import annotations

from ..errors import LocalProtocolError, RemoteProtocolError

DEFAULT_MAX_HEADER_SIZE = 4096
DEFAULT_MAX_BODY_SIZE = 64 * 1024 * 1024

_HEADER_END = b"\r\n\r\n"
_CONTENT_LENGTH = b"content-length"
_USUAL_HEADER = b"Content-Length: "  # the one header line, as written by frame()
_USUAL_LENGTH = len(_USUAL_HEADER)
_HEADER_BYTES = bytes(range(0x20, 0x7F)) + b"\r\n\t"


class NeedData:
    """The type of :data:`NEED_DATA`, its one instance."""

    def __repr__(self) -> str:
        return "NEED_DATA"


NEED_DATA = NeedData()
"""Returned by ``next_*`` methods when more bytes must arrive before a message is whole."""


def frame(body: bytes, max_body_size: int = DEFAULT_MAX_BODY_SIZE) -> bytes:
    """Return ``body`` with its Content-Length header, ready to send.

    Raises :class:`LocalProtocolError` when the body is larger than ``max_body_size``.
    """
    if len(body) > max_body_size:
        raise LocalProtocolError(
            f"refusing to send a {len(body)}-byte message (limit {max_body_size} bytes)"
        )
    return b"Content-Length: %d\r\n\r\n%s" % (len(body), body)


class Framer:
    """A bounded receive buffer that cuts a byte stream into message bodies.

    After :meth:`next_body` raised :class:`RemoteProtocolError` the stream is unusable: the
    caller must close the connection.
    """

    def __init__(
        self,
        max_header_size: int = DEFAULT_MAX_HEADER_SIZE,
        max_body_size: int = DEFAULT_MAX_BODY_SIZE,
    ) -> None:
        self.max_header_size = max_header_size
        self.max_body_size = max_body_size
        self._buffer = bytearray()
        self._body_length: int | None = None  # known once a header has been parsed
        self._eof = False
        self._broken: RemoteProtocolError | None = None

    @property
    def buffered(self) -> int:
        """How many received bytes have not yet been returned as a body."""
        return len(self._buffer)

    @property
    def at_eof(self) -> bool:
        """True once ``receive_data(b"")`` announced the end of the stream."""
        return self._eof

    def receive_data(self, data: bytes) -> None:
        """Append received bytes; ``b""`` means the peer closed its side."""
        if not data:
            self._eof = True
            return
        if self._eof:
            raise LocalProtocolError("received data after end of stream")
        self._buffer += data

    def next_body(self) -> bytes | NeedData:
        """Return the next whole message body, or :data:`NEED_DATA`.

        Raises :class:`RemoteProtocolError` on a malformed or oversized header, and on an
        end of stream in the middle of a message.
        """
        if self._broken is not None:
            raise self._broken
        try:
            return self._next_body()
        except RemoteProtocolError as error:
            self._broken = error
            raise

    def _next_body(self) -> bytes | NeedData:
        if self._body_length is None:
            end = self._buffer.find(_HEADER_END, 0, self.max_header_size + len(_HEADER_END))
            if end < 0:
                if len(self._buffer) > self.max_header_size:
                    raise RemoteProtocolError(
                        f"message header longer than {self.max_header_size} bytes"
                    )
                self._check_header_bytes(self._buffer)
                return self._need_data()
            self._body_length = self._parse_header(bytes(self._buffer[:end]))
            del self._buffer[: end + len(_HEADER_END)]
        if len(self._buffer) < self._body_length:
            return self._need_data()
        if len(self._buffer) == self._body_length:  # the usual case: one message a read
            body = bytes(self._buffer)
            self._buffer.clear()
        else:
            body = bytes(self._buffer[: self._body_length])
            del self._buffer[: self._body_length]
        self._body_length = None
        return body

    def _need_data(self) -> NeedData:
        if self._eof and self._buffer:
            raise RemoteProtocolError(
                f"connection closed in the middle of a message ({len(self._buffer)} bytes left)"
            )
        return NEED_DATA

    @staticmethod
    def _check_header_bytes(data: bytearray) -> None:
        """Refuse binary noise at once instead of waiting for a header end that never comes."""
        if data.translate(None, _HEADER_BYTES):
            raise RemoteProtocolError("message header contains non-text bytes")

    def _parse_header(self, header: bytes) -> int:
        if header.startswith(_USUAL_HEADER) and header[_USUAL_LENGTH:].isdigit() \
                and len(header) <= _USUAL_LENGTH + 12:  # what raydebug and pydevd send
            length: int | None = int(header[_USUAL_LENGTH:])
            return self._checked_length(length)
        length = None
        for line in header.split(b"\r\n"):
            name, colon, value = line.partition(b":")
            if not colon:
                raise RemoteProtocolError(f"malformed header line {line[:80]!r}")
            if name.strip().lower() == _CONTENT_LENGTH:
                text = value.strip()
                if not text.isdigit() or len(text) > 12:
                    raise RemoteProtocolError(f"invalid Content-Length {text[:40]!r}")
                length = int(text)
        return self._checked_length(length)

    def _checked_length(self, length: int | None) -> int:
        if length is None:
            raise RemoteProtocolError("message header has no Content-Length")
        if length > self.max_body_size:
            raise RemoteProtocolError(
                f"message of {length} bytes announced, limit is {self.max_body_size} bytes"
            )
        return length

    def take_buffered(self) -> bytes:
        """Remove and return every buffered byte (when a stream switches protocol)."""
        if self._body_length is not None:
            raise LocalProtocolError("cannot switch protocol in the middle of a message")
        data = bytes(self._buffer)
        self._buffer.clear()
        return data
