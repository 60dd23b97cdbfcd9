"""Small socket helpers shared by the hub's listeners."""

from __future__ import annotations

import asyncio
import collections
import contextvars
import socket
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from ..protocol.framing import NeedData

RECV_SIZE = 256 * 1024
CLIENT_RECV_SIZE = 64 * 1024  # a client connection's one receive (see client_streams)

T = TypeVar("T")


async def read_next(reader: asyncio.StreamReader, receive: Callable[[bytes], None],
                    take: Callable[[], T | NeedData]) -> T | None:
    """The next item a sans-IO reader yields (``take``), feeding it (``receive``) from
    ``reader`` as needed; None at a clean end of stream.

    Raises :class:`~raydebug.errors.RemoteProtocolError` on malformed input, or on an end
    of stream in the middle of a message; OSError when the connection breaks.
    """
    while True:
        item = take()
        if not isinstance(item, NeedData):
            return item
        data = await reader.read(RECV_SIZE)
        receive(data)
        if not data:
            take()  # raises on a partial message
            return None


class ClientReader(asyncio.StreamReader):
    """A DAP client connection's reader, whose bytes can go to a function in the callback
    that received them (:meth:`divert`) instead of waiting in its buffer for a task to read
    them: how a relayed client's requests reach pydevd without a loop turn and a task's
    wake-up each (docs/design.md#per-step-costs). Undiverted, it is an ordinary
    :class:`asyncio.StreamReader`. (It reads the base class's buffer, ``_buffer``, and
    resumes its transport as the base class would: asyncio's own, unchanged since 3.7.)"""

    _receive: Callable[[bytes], None] | None = None
    _feeder: asyncio.BaseTransport | None = None

    def set_transport(self, transport: asyncio.BaseTransport) -> None:
        super().set_transport(transport)
        self._feeder = transport

    def divert(self, receive: Callable[[bytes], None]) -> None:
        """Hand every byte to ``receive`` from now on, those buffered first; ``b""`` once the
        stream has ended (at once if it had), as :meth:`~asyncio.StreamReader.feed_eof` or a
        broken connection (:meth:`~asyncio.StreamReader.exception` then says how) ends it.
        Until :meth:`undivert`."""
        self._receive = receive
        buffered: bytearray = self._buffer  # type: ignore[attr-defined]
        if buffered:
            data = bytes(buffered)
            buffered.clear()
            self._maybe_resume_transport()  # type: ignore[attr-defined]
            receive(data)
        if self.at_eof() or self.exception() is not None:
            receive(b"")

    def undivert(self) -> None:
        """Bytes stay in the buffer again, for ``read``."""
        self._receive = None

    def pause_feeding(self) -> None:
        """Stop the transport that feeds this reader (while diverted: its taker is behind)."""
        if isinstance(self._feeder, asyncio.ReadTransport):
            self._feeder.pause_reading()

    def resume_feeding(self) -> None:
        """Undo :meth:`pause_feeding`."""
        if isinstance(self._feeder, asyncio.ReadTransport) and not self._feeder.is_closing():
            self._feeder.resume_reading()

    def feed_data(self, data: Any) -> None:
        if self._receive is None:
            super().feed_data(data)
        elif data:
            self._receive(bytes(data))

    def feed_eof(self) -> None:
        super().feed_eof()
        if self._receive is not None:
            self._receive(b"")

    def set_exception(self, exc: Exception) -> None:
        super().set_exception(exc)
        if self._receive is not None:
            self._receive(b"")


class _ClientProtocol(asyncio.StreamReaderProtocol):
    """:class:`asyncio.StreamReaderProtocol` whose transport receives at most
    :data:`CLIENT_RECV_SIZE` at a time."""

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # asyncio's socket transport receives into a new bytes object of ``max_size``
        # (256 KiB) each time: above glibc's mmap threshold, an mmap, an mremap and a munmap
        # a request (strace of the hub relaying a client). Below it, the heap's.
        transport.max_size = CLIENT_RECV_SIZE  # type: ignore[attr-defined]
        super().connection_made(transport)


def client_streams(handler: Callable[[asyncio.StreamReader, asyncio.StreamWriter],
                                     Awaitable[None]]) -> Callable[[], asyncio.Protocol]:
    """The protocol factory of a client listener (``loop.create_server``): what
    :func:`asyncio.start_server` makes, with a :class:`ClientReader` for the reader and
    receives of at most :data:`CLIENT_RECV_SIZE`."""
    def protocol() -> asyncio.Protocol:
        return _ClientProtocol(ClientReader(), handler)
    return protocol


def set_nodelay(writer: asyncio.StreamWriter) -> None:
    """Nagle plus delayed ACK would add ~44 ms to every small message (docs/design.md#nodelay)."""
    sock = writer.get_extra_info("socket")
    if sock is not None and sock.family in (socket.AF_INET, socket.AF_INET6):
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)


def peer_name(writer: asyncio.StreamWriter) -> str:
    peer = writer.get_extra_info("peername")
    if isinstance(peer, tuple) and len(peer) >= 2:
        return f"{peer[0]}:{peer[1]}"
    return str(peer or "local")


def peer_host(writer: asyncio.StreamWriter) -> str | None:
    """The peer's IP address; None on a Unix socket."""
    peer = writer.get_extra_info("peername")
    return str(peer[0]) if isinstance(peer, tuple) and peer else None


class PeerLimit:
    """At most ``limit`` concurrent connections per peer address on one listener, so one
    host (a runaway script, a flood, connections that never say anything) cannot take every
    socket the hub can open.

    What counts is connections that have not proven they belong. A connection that has
    (see :meth:`Admission.vouch`: a child of a live cluster session, bound to its process)
    stops counting: such connections are bounded by the paused processes, one client each,
    and one IDE debugging hundreds of processes from one address must not hit this limit.
    """

    def __init__(self, limit: int, listener: str, option: str) -> None:
        self.limit = limit
        self._listener = listener
        self._option = option
        self._open: collections.Counter[str] = collections.Counter()
        self.refused = 0
        self.vouched = 0  # open connections that no longer count

    def acquire(self, host: str | None) -> bool:
        """Count a new connection from ``host``; False (counted as refused) when it has
        ``limit`` open already. A Unix socket's peers (``None``) are not limited."""
        if host is None:
            return True
        if self._open[host] >= self.limit:
            self.refused += 1
            return False
        self._open[host] += 1
        return True

    def release(self, host: str | None) -> None:
        if host is not None:
            self._open[host] -= 1
            if self._open[host] <= 0:
                del self._open[host]

    def admit(self, host: str | None) -> Admission | None:
        """:meth:`acquire` as an :class:`Admission` to close when the connection ends;
        None when refused."""
        return Admission(self, host) if self.acquire(host) else None

    def refusal(self, host: str | None) -> str:
        return (f"too many connections to the hub's {self._listener} port from {host} "
                f"(limit {self.limit}; raise it with `raydebug hub {self._option}`)")

    def statistics(self) -> dict[str, int]:
        return {"counted": sum(self._open.values()), "vouched": self.vouched,
                "limit": self.limit, "refused": self.refused}


class Admission:
    """One admitted connection's place in its :class:`PeerLimit`."""

    def __init__(self, limit: PeerLimit | None, host: str | None) -> None:
        self._limit = limit
        self._host = host
        self.counted = limit is not None

    def vouch(self) -> None:
        """The connection has proven it belongs: from now on it does not count."""
        if self.counted and self._limit is not None:
            self._limit.release(self._host)
            self._limit.vouched += 1
            self.counted = False

    def revoke(self) -> None:
        """Undo :meth:`vouch` (what it proved no longer holds): it counts again, even when
        that puts its address over the limit (it is already open)."""
        if not self.counted and self._limit is not None and self._host is not None:
            self._limit._open[self._host] += 1
            self._limit.vouched -= 1
            self.counted = True

    def close(self) -> None:
        """The connection ended; idempotent."""
        if self._limit is None:
            return
        if self.counted:
            self._limit.release(self._host)
        else:
            self._limit.vouched -= 1
        self._limit = None


# The admission of the connection the current task serves (each connection is its own
# task, with its own copy of the context), so that code deep in a protocol handler can vouch
# for its connection without every layer passing it along.
_CURRENT_ADMISSION: contextvars.ContextVar[Admission | None] = contextvars.ContextVar(
    "raydebug_admission", default=None)


def serve_admitted(admission: Admission) -> None:
    """Make ``admission`` the current task's (call at the start of its connection's task)."""
    _CURRENT_ADMISSION.set(admission)


def vouch_for_this_connection() -> None:
    """The connection the current task serves stops counting toward its peer limit."""
    admission = _CURRENT_ADMISSION.get()
    if admission is not None:
        admission.vouch()


def revoke_this_connection() -> None:
    """The connection the current task serves counts again (see :meth:`Admission.revoke`)."""
    admission = _CURRENT_ADMISSION.get()
    if admission is not None:
        admission.revoke()


def is_loopback(host: str) -> bool:
    return host in ("localhost", "::1") or host.startswith("127.")


def raise_open_file_limit(wanted: int = 65536) -> int:
    """Raise this process's soft limit on open files towards ``wanted`` (never above the
    hard limit); return the limit in force. The hub holds a socket per paused process, and
    the usual soft limit of 1,024 would refuse a cluster's thousandth worker."""
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = wanted if hard == resource.RLIM_INFINITY else min(wanted, hard)
    if soft != resource.RLIM_INFINITY and soft < target:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
            soft = target
        except (ValueError, OSError):
            pass  # keep what we have; the connection limits still apply
    return int(soft)
