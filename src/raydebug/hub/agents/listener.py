"""The agent listener: authenticates agents, keeps their control connections, and hands
data connections to the DAP client that asked for them.

Every connection is answered with a fresh nonce; an agent proves it knows the token with an
HMAC over it and its own nonce, and the hub then proves it too
(:mod:`raydebug.protocol.handshake`), so the token never crosses the wire, a recorded
handshake cannot be replayed, and an agent gives nothing to a listener without the token. A
connection that does not answer within the handshake timeout is closed (an established one
may then stay idle: a paused process waits). An agent of another protocol version is
refused with a message naming both versions.

Control messages are dispatched through one table, by type (:meth:`AgentListener._on_control`):
a process's ``Register`` and sessions land in the registry, its answers (``Stacks``,
``Paused``) go to the question waiting for them (:mod:`raydebug.hub.processes`), what it says
of the cluster's breakpoints goes to a :class:`BreakpointKeeper`. A message that has no
place on a control connection is the agent's error; it, a malformed message or a bug of ours
closes that connection only, logged with the peer's address (:mod:`.control_reader`).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any, Protocol

from ...errors import (
    AuthenticationError,
    HubFullError,
    ProtocolVersionError,
    RaydebugError,
    RemoteProtocolError,
    SessionBusyError,
)
from ...process_record import ProcessRecord
from ...protocol.control import (
    ROLE_CONTROL,
    ArmBreakpoints,
    BreakpointsLoaded,
    ControlConnection,
    ControlMessage,
    DataConnectionFailed,
    Hello,
    Identify,
    LogpointOutput,
    PauseCancelled,
    Paused,
    PausePending,
    Refused,
    Register,
    Resumed,
    SessionEnded,
    SessionStarted,
    SnapshotTaken,
    Stacks,
    encode_control,
)
from ...protocol.handshake import HubHandshake
from ...session import PausedThread
from ..entries import Process
from ..net import peer_host, peer_name, read_next, set_nodelay, vouch_for_this_connection
from ..processes import ProcessQueries
from ..registry import Registry
from ..snapshot_store import SnapshotStore
from .control_reader import ControlReader
from .data_connections import DataConnection, PendingDataConnections
from .data_receiver import DataReceiver

log = logging.getLogger("raydebug.hub")

# How one control message is handled: nothing to wait for (None), or an awaitable that the
# connection's later messages wait for (see control_reader).
HandleControl = Callable[[Process, Any], Awaitable[None] | None]


class BreakpointKeeper(Protocol):
    """Who keeps the cluster's breakpoints, as the listener sees it (the hub's cluster
    attaches): what a process arms first, and what processes say about breakpoints. A
    Protocol, so that this package does not import the clients' (which import it)."""

    def arm_message(self) -> ArmBreakpoints:
        """The cluster's breakpoints, for a process that has just identified itself."""

    def loaded(self, paths: list[str]) -> None:
        """A process has code of these client paths loaded."""

    def logpoint(self, process: dict[str, Any], output: LogpointOutput) -> None:
        """A logpoint's text from ``process`` (its record, ``Registry.process_view``, with
        the task it ran when it logged)."""


REFUSAL_LOG_INTERVAL = 60.0  # seconds between two log lines of one host's same refusal
_MAX_REFUSAL_KEYS = 10_000


class RefusalLog:
    """Logs the refusal of an agent's connection: the first of each peer host and reason,
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
        log.warning("agent %s: refused: %s%s", peer, reason, more)


class AgentListener:
    """Serves the agents' port: each connection, from its handshake to its close
    (:meth:`handle`). ``breakpoints`` keeps the cluster's breakpoints; ``data_connections``
    are those the clients wait for; ``queries`` (a new one by default) the questions asked
    of live processes."""

    def __init__(self, token: str, registry: Registry, data_connections: PendingDataConnections,
                 breakpoints: BreakpointKeeper, handshake_timeout: float = 10.0,
                 queries: ProcessQueries | None = None,
                 snapshots: SnapshotStore | None = None) -> None:
        self._token = token
        self.snapshots = snapshots or SnapshotStore()
        self._registry = registry
        self._breakpoints = breakpoints
        self.queries = queries or ProcessQueries(registry)
        self._data_connections = data_connections
        self._handshake_timeout = handshake_timeout
        self.refused = 0
        self.refusals = RefusalLog()
        # A control connection's messages after Identify, by type: what is not here has no
        # place on one (the agent's error, see _on_control).
        self._dispatch: dict[type[ControlMessage], HandleControl] = {
            Stacks: self.queries.answer,
            Paused: self.queries.answer,
            PauseCancelled: self.queries.answer,
            Resumed: self.queries.answer,
            PausePending: _pause_pending,
            SessionStarted: lambda process, m: self._session_started(
                process, PausedThread.from_dict(m.session)),
            SessionEnded: lambda process, m: self._registry.end_session(
                process, m.session_id, m.reason, m.returned),
            DataConnectionFailed: lambda process, m: self._data_connections.fail(
                m.channel, m.reason),
            Register: lambda process, m: self._registry.register_process(
                process, ProcessRecord.from_dict(m.process)),
            BreakpointsLoaded: lambda process, m: self._breakpoints.loaded(m.paths),
            LogpointOutput: self._logpoint,
            SnapshotTaken: self._snapshot_taken,
        }

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
        """Serve one agent's connection, control or data; always closes it. What goes wrong
        (the agent's error, the connection's, a bug of ours) is logged with the peer's
        address and closes this connection only."""
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
            stream = ControlConnection()
            if leftover := handshake.take_buffered():  # (b"" would say end of stream)
                stream.receive_data(leftover)
            if hello.role == ROLE_CONTROL:
                await self._serve_control(writer, stream, peer)
            else:
                await self._serve_data(writer, stream, hello)
        except (RaydebugError, OSError, TimeoutError) as error:
            log.warning("agent %s: %s; connection closed", peer, error or type(error).__name__)
        except Exception:  # a bug of ours: close this connection, keep serving the others
            log.exception("agent %s: unexpected error; connection closed", peer)
        finally:
            writer.close()

    async def _authenticate(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                            handshake: HubHandshake, peer: str) -> Hello | None:
        """Challenge the agent, check its proof and prove ours (the Welcome); None when
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

    async def _serve_control(self, writer: asyncio.StreamWriter, stream: ControlConnection,
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
            process = self._registry.add_process(ProcessRecord.from_dict(message.process),
                                                 peer, send)
            send(self._breakpoints.arm_message())  # the cluster's, before it registers
            log.info("agent %s: process %s (pid %s) connected", peer, process.id,
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
            log.info("agent %s: process %s disconnected", peer, process.id)

    def _on_control(self, process: Process, message: ControlMessage) -> Awaitable[None] | None:
        """Handle one message of ``process`` through the dispatch table; what needs the loop
        is returned to be awaited (the messages after it wait). Raises
        :class:`RemoteProtocolError` for a message that has no place on a control connection
        (the agent's error); a bug of ours raises what it raises. Either closes the
        connection, logged (:class:`ControlReader`)."""
        handle = self._dispatch.get(type(message))
        if handle is None:
            raise RemoteProtocolError(f"unexpected {message.TYPE!r} on a control connection")
        return handle(process, message)

    def _logpoint(self, process: Process, message: LogpointOutput) -> None:
        view = self._registry.process_view(process)
        if message.task:
            view["task_name"] = message.task  # what it ran when it logged
        self._breakpoints.logpoint(view, message)

    def _snapshot_taken(self, process: Process, message: SnapshotTaken) -> Awaitable[None]:
        """Keep the snapshot (a malformed one raises :class:`RemoteProtocolError`); its
        file, with ``--snapshot-dir``, is written before the process's next message."""
        view = self._registry.process_view(process)
        snapshot, dropped = self.snapshots.receive(message.snapshot, view)
        log.info("agent %s: snapshot %s of process %s", process.peer, snapshot.id, process.id)
        return self.snapshots.save(snapshot, dropped)

    async def _session_started(self, process: Process, record: PausedThread) -> None:
        """Add the session to the registry; one the hub cannot take is refused (the agent
        is told, with ``Refused``), and the process's other sessions stay served."""
        try:
            await self._registry.add_session(process, record)
        except (SessionBusyError, HubFullError) as error:
            log.warning("agent %s: session %s refused: %s", process.peer, record.id, error)
            process.send(Refused(reason=f"session {record.id}: {error}"))

    async def _serve_data(self, writer: asyncio.StreamWriter, stream: ControlConnection,
                          hello: Hello) -> None:
        """Hand the data connection to the client that asked for it, received by a
        :class:`DataReceiver` from now on. Called right after the Welcome was written,
        with no wait in between: pydevd speaks only when spoken to, so nothing is left in
        ``writer``'s stream reader (what came with the Hello is in ``stream``)."""
        transport = writer.transport
        assert isinstance(transport, asyncio.Transport)
        receiver = DataReceiver(transport, stream.take_buffered())
        transport.set_protocol(receiver)
        connection = DataConnection(transport, receiver, self._data_connections.answer_due)
        if not self._data_connections.deliver(hello.channel, connection):
            raise RemoteProtocolError(f"unknown data connection {hello.channel}")
        await connection.done.wait()  # the client's relay owns the streams until then



def _pause_pending(process: Process, message: PausePending) -> None:
    """The threads a pause was asked of that have not stopped yet (none: no pause pending)."""
    process.pause_requested = {"threads": message.threads, "since": message.since_ms / 1000} \
        if message.threads else None
