"""The worker listener: authenticates agents, keeps their control connections, and hands
data connections to the DAP client that asked for them.

Every connection is answered with a fresh nonce; a worker proves it knows the token with an
HMAC over it and its own nonce, and the hub then proves it too
(:mod:`raydebug.protocol.handshake`), so the token never crosses the wire, a recorded
handshake cannot be replayed, and a worker gives nothing to a listener without the token. A
connection that does not answer within the handshake timeout is closed (an established one
may then stay idle: a paused process waits). A worker of another protocol version is
refused with a message naming both versions.
Failures are logged with the peer's address and the connection is closed; nothing else on
the hub is affected. A live process's ``Register`` lands in the registry; its answers
(``Stacks``, ``Paused``) go to the question waiting for them (:mod:`.processes`).
"""

from __future__ import annotations

import asyncio
import logging
import secrets
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from ...errors import (
    AuthenticationError,
    ChannelFailedError,
    HubFullError,
    ProtocolVersionError,
    RaydebugError,
    RemoteProtocolError,
    SessionBusyError,
)
from ...protocol.control import (
    ROLE_CONTROL,
    BreakpointsLoaded,
    ChannelFailed,
    ControlMessage,
    ControlStream,
    Hello,
    Identify,
    LogpointOutput,
    PauseCancelled,
    Paused,
    PausePending,
    Refused,
    Register,
    SessionEnded,
    SessionStarted,
    Stacks,
    encode_control,
)
from ...protocol.handshake import HubHandshake
from ...session import PausedThread
from ..clients.cluster_attach import ClusterAttaches, process_prefix
from ..net import peer_host, peer_name, read_next, set_nodelay, vouch_for_this_connection
from ..processes import ProcessQueries
from ..registry import Process, Registry
from .control_reader import ControlReader
from .data_receiver import ChannelReceiver

log = logging.getLogger("raydebug.hub")


@dataclass
class DataChannel:
    """A worker's data connection, handed to the client that requested it: its transport
    (to write to pydevd) and what receives pydevd's messages."""

    transport: asyncio.Transport
    receiver: ChannelReceiver
    done: asyncio.Event = field(default_factory=asyncio.Event)


class PendingChannels:
    """Channels a client asked a process to open, by channel id, from the request until the
    client has set the channel up (then it calls :meth:`forget`).

    The agent reports a failure with ``ChannelFailed`` on its control connection. Before the
    data connection arrives that fails the wait for it; after (pydevd refused the socket, so
    the agent closed it), the client sees the data connection close first and asks
    :meth:`wait_failure` for the reason.
    """

    def __init__(self) -> None:
        self._connections: dict[int, asyncio.Future[DataChannel]] = {}
        self._failures: dict[int, asyncio.Future[str]] = {}

    def expect(self) -> tuple[int, asyncio.Future[DataChannel]]:
        """A new channel id, and the future its data connection will be delivered to (it
        raises :class:`ChannelFailedError` when the agent reports a failure first)."""
        channel = secrets.randbits(62)
        loop = asyncio.get_running_loop()
        connection: asyncio.Future[DataChannel] = loop.create_future()
        self._connections[channel] = connection
        self._failures[channel] = loop.create_future()
        return channel, connection

    def forget(self, channel: int) -> None:
        self._connections.pop(channel, None)
        self._failures.pop(channel, None)

    def deliver(self, channel: int, data: DataChannel) -> bool:
        """Hand a data connection to the client expecting it; False when none is."""
        connection = self._connections.pop(channel, None)
        if connection is None or connection.done():
            return False
        connection.set_result(data)
        return True

    def fail(self, channel: int, reason: str) -> None:
        """The channel cannot be served, for ``reason``; nothing when it is not pending."""
        connection = self._connections.pop(channel, None)
        if connection is not None and not connection.done():
            connection.set_exception(ChannelFailedError(reason))
        failure = self._failures.get(channel)
        if failure is not None and not failure.done():
            failure.set_result(reason)

    async def wait_failure(self, channel: int, timeout: float) -> str | None:
        """The reason the agent gave for failing ``channel``, waiting up to ``timeout``
        seconds for it; None when it gave none (or the channel is not pending)."""
        failure = self._failures.get(channel)
        if failure is None:
            return None
        try:
            return await asyncio.wait_for(asyncio.shield(failure), timeout)
        except TimeoutError:
            return None


REFUSAL_LOG_INTERVAL = 60.0  # seconds between two log lines of one host's same refusal
_MAX_REFUSAL_KEYS = 10_000


class RefusalLog:
    """Logs the refusal of a worker's connection: the first of each peer host and reason,
    then at most one a :data:`REFUSAL_LOG_INTERVAL`, saying how many went unlogged. A
    process that holds another token (paused under a hub that restarted with a new one)
    retries every few seconds for as long as it waits."""

    def __init__(self, clock: Callable[[], float] = time.monotonic,
                 interval: float = REFUSAL_LOG_INTERVAL) -> None:
        self._clock = clock
        self._interval = interval
        self._said: dict[tuple[str, str], tuple[float, int]] = {}  # -> (when, unlogged since)

    def refused(self, peer: str, host: str | None, reason: object) -> None:
        """Log that ``peer`` (``host:port``; ``host`` its address) was refused for ``reason``,
        unless the same was logged less than an interval ago."""
        key, now = (host or peer, str(reason)), self._clock()
        said, unlogged = self._said.get(key, (None, 0))
        if said is not None and now - said < self._interval:
            self._said[key] = (said, unlogged + 1)
            return
        if len(self._said) >= _MAX_REFUSAL_KEYS:
            self._said.clear()  # a flood of hosts and reasons: start counting again
        self._said[key] = (now, 0)
        more = f" (and {unlogged} more from {key[0]} since the last said)" if unlogged else ""
        log.warning("worker %s: refused: %s%s", peer, reason, more)


class WorkerListener:
    def __init__(self, token: str, registry: Registry, channels: PendingChannels,
                 handshake_timeout: float = 10.0,
                 queries: ProcessQueries | None = None,
                 cluster: ClusterAttaches | None = None) -> None:
        self._token = token
        self._registry = registry
        self._cluster = cluster or ClusterAttaches()  # cluster breakpoints: arm, verify, log
        self.queries = queries or ProcessQueries(registry)
        self._channels = channels
        self._handshake_timeout = handshake_timeout
        self.refused = 0
        self.refusals = RefusalLog()

    async def refuse(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                     reason: str) -> None:
        """Answer a connection with ``Refused(reason)`` instead of a challenge; close it."""
        self.refused += 1
        self.refusals.refused(peer_name(writer), peer_host(writer), reason)
        try:
            writer.write(encode_control(Refused(reason=reason)))
            await asyncio.wait_for(writer.drain(), self._handshake_timeout)
        except (OSError, TimeoutError):
            pass
        finally:
            writer.close()

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """Serve one worker connection; always closes it."""
        set_nodelay(writer)
        peer = peer_name(writer)
        handshake = HubHandshake(self._token)
        try:
            hello = await self._authenticate(reader, writer, handshake, peer)
            if hello is None:
                return
            # Proven: the per-address limit is for connections that have not (a node with
            # hundreds of attached processes holds two authenticated connections each).
            vouch_for_this_connection()
            stream = ControlStream()
            if leftover := handshake.take_buffered():  # (b"" would say end of stream)
                stream.receive_data(leftover)
            if hello.role == ROLE_CONTROL:
                await self._serve_control(writer, stream, peer)
            else:
                await self._serve_data(writer, stream, hello)
        except (RaydebugError, OSError, TimeoutError) as error:
            log.warning("worker %s: %s; connection closed", peer, error or type(error).__name__)
        except Exception:  # a bug of ours: close this connection, keep serving the others
            log.exception("worker %s: unexpected error; connection closed", peer)
        finally:
            writer.close()

    async def _authenticate(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                            handshake: HubHandshake, peer: str) -> Hello | None:
        """Challenge the worker, check its proof and prove ours (the Welcome); None when
        it was refused (wrong token, another protocol version: it is told why)."""
        writer.write(handshake.send())
        try:
            hello = await asyncio.wait_for(
                read_next(reader, handshake.receive_data, handshake.next_event),
                self._handshake_timeout)
        except TimeoutError:
            raise RemoteProtocolError(f"no answer to the challenge within "
                                      f"{self._handshake_timeout:g}s") from None
        except (AuthenticationError, ProtocolVersionError) as error:
            self.refused += 1
            self.refusals.refused(peer, peer_host(writer), error)
            writer.write(handshake.refuse(str(error)))
            await writer.drain()
            return None
        assert hello is not None  # the handshake raises at an end of stream
        writer.write(handshake.send())  # the Welcome, with the hub's own proof
        return hello

    async def _serve_control(self, writer: asyncio.StreamWriter, stream: ControlStream,
                             peer: str) -> None:
        """Serve a control connection through a :class:`ControlReader` (a protocol, not
        this task: the answers to a listing's 10,000 questions are handled as they arrive);
        this task waits for its end, then forgets the process.

        Called right after the Welcome was written, with no wait in between: the agent sends
        nothing before it has checked the Welcome, so nothing is left in ``writer``'s stream
        reader (what came with the Hello is in ``stream``)."""
        transport = writer.transport
        assert isinstance(transport, asyncio.Transport)

        def send(message: ControlMessage | bytes) -> None:
            """Send ``message``, or bytes already encoded (one question to many)."""
            if not transport.is_closing():
                transport.write(message if isinstance(message, bytes)
                                else encode_control(message))

        identified: asyncio.Future[Process] = asyncio.get_running_loop().create_future()

        def first(message: ControlMessage) -> None:
            # The agent says who it is only once the hub proved itself (argv may hold
            # secrets).
            if not isinstance(message, Identify):
                raise RemoteProtocolError("expected an identify message first on a control "
                                          "connection")
            process = self._registry.add_process(message.process, peer, send)
            send(self._cluster.arm_message())  # the cluster's breakpoints, before it registers
            log.info("worker %s: process %s (pid %s) connected", peer, process.id,
                     message.process.get("pid"))
            identified.set_result(process)

        def handle(message: ControlMessage) -> Awaitable[None] | None:
            if identified.done():
                return self._on_control(identified.result(), message)
            first(message)
            return None

        reader = ControlReader(transport, stream, handle, peer)
        transport.set_protocol(reader)
        reader.start()
        try:
            await asyncio.wait((identified, reader.closed), timeout=self._handshake_timeout,
                               return_when=asyncio.FIRST_COMPLETED)
        finally:
            if not identified.done():  # timed out, or closed (told why: logged)
                reader.close()
                identified.cancel()
        if identified.cancelled():
            if reader.closed.done():
                return
            raise RemoteProtocolError(f"no identify message within "
                                      f"{self._handshake_timeout:g}s")
        process = identified.result()
        try:
            await reader.finished()
        finally:
            await self._registry.remove_process(process)
            self.queries.lost(process)
            log.info("worker %s: process %s disconnected", peer, process.id)

    def _on_control(self, process: Process, message: ControlMessage) -> Awaitable[None] | None:
        """Handle one message of ``process``; what needs the loop is returned to be awaited
        (the messages after it wait)."""
        if isinstance(message, (Stacks, Paused, PauseCancelled)):
            self.queries.answer(process, message)
        elif isinstance(message, PausePending):
            process.pause_requested = {"threads": message.threads,
                                       "since": message.since_ms / 1000} \
                if message.threads else None
        elif isinstance(message, SessionStarted):
            return self._session_started(process, PausedThread.from_dict(message.session))
        elif isinstance(message, SessionEnded):
            return self._registry.end_session(process, message.session_id, message.reason,
                                              message.returned)
        elif isinstance(message, ChannelFailed):
            self._channels.fail(message.channel, message.reason)
        elif isinstance(message, Register):
            return self._registry.register_process(process, message.process)
        elif isinstance(message, BreakpointsLoaded):
            self._cluster.loaded(message.paths)
        elif isinstance(message, LogpointOutput):
            view = self._registry.process_view(process)
            if message.task:
                view["task_name"] = message.task  # what it ran when it logged
            self._cluster.logpoint(process_prefix(view), message)
        else:
            raise RemoteProtocolError(f"unexpected {message.TYPE!r} on a control connection")
        return None

    async def _session_started(self, process: Process, record: PausedThread) -> None:
        try:
            await self._registry.add_session(process, record)
        except (SessionBusyError, HubFullError) as error:  # its other sessions stay served
            log.warning("worker %s: session %s refused: %s", process.peer, record.id, error)
            process.send(Refused(reason=f"session {record.id}: {error}"))

    async def _serve_data(self, writer: asyncio.StreamWriter, stream: ControlStream,
                          hello: Hello) -> None:
        """Hand the data connection to the client that asked for it, received by a
        :class:`ChannelReceiver` from now on. Called right after the Welcome was written,
        with no wait in between: pydevd speaks only when spoken to, so nothing is left in
        ``writer``'s stream reader (what came with the Hello is in ``stream``)."""
        transport = writer.transport
        assert isinstance(transport, asyncio.Transport)
        receiver = ChannelReceiver(transport, stream.take_buffered())
        transport.set_protocol(receiver)
        channel = DataChannel(transport, receiver)
        if not self._channels.deliver(hello.channel, channel):
            raise RemoteProtocolError(f"unknown data channel {hello.channel}")
        await channel.done.wait()  # the client's proxy owns the streams until then

