"""The hub: one object that owns the listeners and all state (a test can run two).

The agents' listener (``agent_host``/``agent_port``) takes each agent's link
(token-authenticated; with ``tls``, inside TLS with a self-signed certificate that agents
pin, see :mod:`raydebug.tls`). The client listener (127.0.0.1 by default) serves DAP and
HTTP on one port: both protocols speak first, so the first bytes decide (``Content-Length``
-> DAP, an HTTP method -> HTTP). What each HTTP route answers is :mod:`.http.routes`'s.

Limits, each a :class:`HubConfig` field: concurrent connections per peer address on each
listener (one more is refused with a message saying which setting to raise; connections
that proved they belong do not count, see :class:`~raydebug.hub.net.PeerLimit`), the time an
agent has to finish its handshake, the time a client has to send its first bytes, and the
number of sessions.
"""

from __future__ import annotations

import asyncio
import gc
import logging
import os
import re
import secrets
from collections.abc import Callable
from dataclasses import dataclass, field
from http import HTTPStatus
from pathlib import Path
from typing import Any

from .. import state_file, tls, web
from ..errors import ClientRefusedError, ConfigurationError, RaydebugError
from ..protocol import DapConnection, Event, Request, Response, encode_message, frame
from ..protocol.control import ArmBreakpoints
from .agents.data_connections import PendingDataConnections
from .agents.listener import AgentListener
from .clients.admission import ClientAdmission
from .clients.cluster_sessions import ClusterSessions
from .clients.handler import ClientHandler
from .http.api import serve_http
from .http.exchange import respond
from .http.host_check import HubNames
from .http.routes import HubRoutes
from .net import (
    Admission,
    PeerLimit,
    client_streams,
    is_loopback,
    peer_host,
    peer_name,
    raise_open_file_limit,
    read_next,
    serve_admitted,
    set_nodelay,
)
from .processes import ProcessQueries
from .registry import Registry
from .snapshot_store import DEFAULT_CAPACITY, SnapshotStore
from .tls_server import TlsServer

log = logging.getLogger("raydebug.hub")

_HTTP_REQUEST = re.compile(rb"^(GET|HEAD|POST|PUT|DELETE|OPTIONS|PATCH) ")
_DAP_PREFIX = b"content-length"


@dataclass
class HubConfig:
    host: str = "127.0.0.1"
    port: int = 5678
    agent_host: str = "127.0.0.1"
    agent_port: int = 5679
    token: str = field(default_factory=lambda: secrets.token_urlsafe(24))
    allow_terminate: bool = False
    max_sessions: int = 10_000
    client_token: str | None = None  # required of DAP and HTTP clients when set
    unix_socket: str | None = None  # also serve clients here (mode 0600: this user only)
    tls: bool = False  # serve agents over TLS, with a self-signed certificate they pin
    tls_dir: str | None = None  # where that certificate is kept (default: the state dir)
    # Concurrent connections per peer address. 1,000 paused processes on one host (a load
    # generator, a big node) must fit: each holds one control connection, two when attached.
    max_agent_connections: int = 1_000
    max_client_connections: int = 64
    handshake_timeout: float = 10.0  # for an agent's TLS handshake and challenge answer
    client_idle_timeout: float = 30.0  # for a client's first bytes
    max_snapshots: int = DEFAULT_CAPACITY  # kept in memory, the oldest dropped
    snapshot_dir: str | None = None  # also kept there as JSON files, read back at start


# The hub holds one small object graph per linked process, ~150 objects each: with
# 10,000 of them, every full collection walks 1.5 M objects (0.3-0.5 s, measured) and
# Python's default thresholds ran one every other listing. Its garbage is almost all freed
# by reference counting; cycles (closed connections) wait a little longer.
GC_THRESHOLDS = (50_000, 20, 100)


def collect_garbage_seldom() -> None:
    """Collect cyclic garbage seldom (:data:`GC_THRESHOLDS`), and never walk the objects
    that exist at start (modules, classes: they live as long as the hub)."""
    gc.set_threshold(*GC_THRESHOLDS)
    gc.freeze()


def sniff(data: bytes) -> str | None:
    """``"dap"``, ``"http"``, ``"unknown"``, or None when more bytes are needed."""
    if _HTTP_REQUEST.match(data):
        return "http"
    prefix = data[: len(_DAP_PREFIX)].lower()
    if prefix == _DAP_PREFIX:
        return "dap"
    if _DAP_PREFIX.startswith(prefix) or (len(data) < 8 and data.isalpha() and data.isupper()):
        return None
    return "unknown"


class Hub:
    """``answer_due`` is called as a client's request is written to a process, and
    ``statistics`` adds to :meth:`statistics` (the standalone hub's
    :class:`~raydebug.hub.busy_poll.BusyPollSelector`'s)."""

    def __init__(self, config: HubConfig | None = None,
                 answer_due: Callable[[], None] = lambda: None,
                 statistics: Callable[[], dict[str, Any]] = dict) -> None:
        self._more_statistics = statistics
        self.config = config or HubConfig()
        if not is_loopback(self.config.host) and not self.config.client_token:
            raise ConfigurationError(
                f"refusing to serve debug clients on {self.config.host} without a client "
                "token: every evaluate is remote code execution. Listen on 127.0.0.1 and use "
                "an SSH tunnel, or set --client-token (env RAYDEBUG_CLIENT_TOKEN).")
        self.registry = Registry(max_sessions=self.config.max_sessions)
        self.data_connections = PendingDataConnections(answer_due)
        self.cluster_sessions = ClusterSessions(push=self._push_breakpoints)
        # Told the cluster's breakpoints (None: there are none) each time they change: the
        # Ray integration publishes them where a worker reads them at its start, before its
        # first task (the link comes later); nobody by default.
        self.publish_breakpoints: Callable[[dict[str, Any] | None], None] = lambda wire: None
        self.queries = ProcessQueries(self.registry)
        self.snapshots = SnapshotStore(
            self.config.max_snapshots,
            Path(self.config.snapshot_dir) if self.config.snapshot_dir else None)
        self.agents = AgentListener(self.config.token, self.registry, self.data_connections,
                                    self.cluster_sessions, self.config.handshake_timeout,
                                    self.queries, self.snapshots)
        self.agent_limit = PeerLimit(self.config.max_agent_connections, "agent",
                                     "--max-agent-connections")
        self.client_limit = PeerLimit(self.config.max_client_connections, "client",
                                      "--max-client-connections")
        # Who may use the client port, and by which names (clients.admission, http.host_check).
        self.admission = ClientAdmission(has_client_token=bool(self.config.client_token))
        self.http_names = HubNames(self.config.host)
        self.routes = HubRoutes(self.registry, self.queries, self.cluster_sessions,
                                client_token=self.config.client_token,
                                statistics=self.statistics, serve_dap=self._serve_dap,
                                snapshots=self.snapshots)
        self.certificate: tls.Certificate | None = None
        self._servers: list[asyncio.Server | TlsServer] = []
        self.client_address: tuple[str, int] = (self.config.host, self.config.port)
        self.agent_address: tuple[str, int] = (self.config.agent_host, self.config.agent_port)
        self._connections: set[asyncio.Task[Any]] = set()

    async def start(self) -> None:
        """Bind both listeners; raises OSError when a port is taken, ConfigurationError
        when the TLS certificate can be neither loaded nor created."""
        raise_open_file_limit()
        if self.snapshots.load():
            log.info("%d snapshots read from %s", len(self.snapshots.all()),
                     self.config.snapshot_dir)
        collect_garbage_seldom()
        if (blind := self.admission.blind_spot()) is not None:
            log.warning("%s", blind)
        serve_agent = self._track(self.agents.handle, self.agent_limit, self.agents.refuse)
        agents: asyncio.Server | TlsServer
        if self.config.tls:
            directory = Path(self.config.tls_dir) if self.config.tls_dir else None
            self.certificate = tls.load_or_create(directory or state_file.directory())
            agents = await TlsServer.start(
                self.config.agent_host, self.config.agent_port,
                self.certificate.server_context(), self.config.handshake_timeout, serve_agent)
        else:
            agents = await asyncio.start_server(serve_agent, self.config.agent_host,
                                                self.config.agent_port)
        self._servers.append(agents)
        clients = await asyncio.get_running_loop().create_server(
            client_streams(self._track(self._handle_client, self.client_limit,
                                       self._refuse_client)),
            self.config.host, self.config.port)
        self._servers.append(clients)
        self.agent_address = agents.sockets[0].getsockname()[:2]
        self.client_address = clients.sockets[0].getsockname()[:2]
        if self.config.unix_socket:
            self._servers.append(await self._start_unix(self.config.unix_socket))

    async def _start_unix(self, path: str) -> asyncio.Server:
        """A client listener on a Unix socket only this user can open (shared head nodes:
        other local users cannot reach the hub). ``ssh -L PORT:PATH`` forwards to it."""
        directory = os.path.dirname(os.path.abspath(path))
        os.makedirs(directory, mode=0o700, exist_ok=True)
        if os.path.exists(path):
            os.unlink(path)  # a previous hub's leftover
        old_mask = os.umask(0o177)  # created 0600 from the start: no window for others
        try:
            server = await asyncio.get_running_loop().create_unix_server(
                client_streams(self._track(self._handle_client, None, self._refuse_client)),
                path)
        finally:
            os.umask(old_mask)
        os.chmod(path, 0o600)
        return server

    async def serve_forever(self) -> None:
        await asyncio.gather(*(server.serve_forever() for server in self._servers))

    async def close(self) -> None:
        for server in self._servers:
            server.close()
        if self.config.unix_socket and os.path.exists(self.config.unix_socket):
            os.unlink(self.config.unix_socket)
        for task in list(self._connections):
            task.cancel()
        await asyncio.gather(*self._connections, return_exceptions=True)
        for server in self._servers:
            await server.wait_closed()

    def statistics(self) -> dict[str, Any]:
        return {**self.registry.statistics(), "refused_agents": self.agents.refused,
                "refused_clients_over_limit": self.client_limit.refused,
                "refused_clients_not_admitted": self.admission.refused,
                "client_connections": self.client_limit.statistics(),
                "snapshots": len(self.snapshots.all()),
                "snapshots_received": self.snapshots.received, **self._more_statistics()}

    def _track(self, handler: Any, limit: PeerLimit | None, refuse: Any) -> Any:
        """``handler`` for each connection that ``limit`` admits, else ``refuse`` (with the
        reason); the hub's close cancels either."""
        async def tracked(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            task = asyncio.current_task()
            assert task is not None
            self._connections.add(task)
            host = peer_host(writer)
            admission = Admission(None, host) if limit is None else limit.admit(host)
            try:
                if admission is not None:
                    serve_admitted(admission)
                    await handler(reader, writer)
                else:
                    assert limit is not None
                    await refuse(reader, writer, limit.refusal(host))
            except asyncio.CancelledError:
                writer.close()  # the hub is closing
            finally:
                if admission is not None:
                    admission.close()
                self._connections.discard(task)
        return tracked

    async def _refuse_client(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                             reason: str) -> None:
        """Tell a client why it is refused, in its own protocol, and close. The cluster
        sessions of that address hear it too: a refused child would otherwise just never
        appear in the IDE."""
        log.warning("client %s: refused: %s", peer_name(writer), reason)
        self.cluster_sessions.tell(peer_host(writer),
                                   f"raydebug hub: refused a connection: {reason}")
        try:
            first = await asyncio.wait_for(self._sniffed_bytes(reader),
                                           self.config.client_idle_timeout)
            if sniff(first) == "http":
                respond(writer, HTTPStatus.SERVICE_UNAVAILABLE, {"error": reason})
            elif sniff(first) == "dap":
                writer.write(frame(encode_message(Event(seq=1, event="output", body={
                    "category": "console", "output": f"raydebug hub: {reason}\n"}))))
            await asyncio.wait_for(writer.drain(), self.config.client_idle_timeout)
        except (TimeoutError, OSError):
            pass
        finally:
            writer.close()

    async def _handle_client(self, reader: asyncio.StreamReader,
                             writer: asyncio.StreamWriter) -> None:
        set_nodelay(writer)
        peer = peer_name(writer)
        try:
            # Who the client is, while its socket surely exists (before it can close).
            refusal = self._admit(writer)
            first = await asyncio.wait_for(self._sniffed_bytes(reader),
                                           self.config.client_idle_timeout)
            kind = sniff(first) if first else None
            if kind == "dap" and refusal is not None:
                await self._refuse_dap(reader, writer, first, str(refusal))
            elif kind == "dap":
                await self._serve_dap(reader, writer, first, self.config.client_token)
            elif kind == "http":
                await serve_http(first, reader, writer, self.routes.table(),
                                 self.config.client_token, names=self.http_names,
                                 refusal=refusal, public=web.is_page_file)
            elif first:
                log.warning("client %s: neither DAP nor HTTP; connection closed", peer)
                writer.write(b"raydebug hub: speak DAP (Content-Length framing) or HTTP\r\n")
        except (TimeoutError, OSError):
            pass
        except Exception:
            log.exception("client %s: unexpected error", peer)
        finally:
            writer.close()

    def _admit(self, writer: asyncio.StreamWriter) -> ClientRefusedError | None:
        """None for a client the hub serves; else the refusal, logged (with the uid)."""
        try:
            self.admission.check(writer.get_extra_info("peername"),
                                 writer.get_extra_info("sockname"))
        except ClientRefusedError as refusal:
            log.warning("client %s: refused: %s", peer_name(writer), refusal)
            return refusal
        return None

    async def _refuse_dap(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                          first: bytes, reason: str) -> None:
        """Answer the client's first request with an error saying why, print it in its
        console too (an ``output`` event), and close."""
        connection = DapConnection()
        connection.receive_data(first)
        try:
            request = await asyncio.wait_for(
                read_next(reader, connection.receive_data, connection.next_event),
                self.config.client_idle_timeout)
        except (RaydebugError, TimeoutError):
            request = None
        writer.write(frame(encode_message(Event(seq=1, event="output", body={
            "category": "important", "output": f"raydebug hub: {reason}\n"}))))
        if isinstance(request, Request):
            writer.write(frame(encode_message(Response(
                seq=2, request_seq=request.seq, command=request.command, success=False,
                message=f"raydebug hub: {reason}"))))
        await asyncio.wait_for(writer.drain(), self.config.client_idle_timeout)

    @staticmethod
    async def _sniffed_bytes(reader: asyncio.StreamReader) -> bytes:
        data = b""
        while True:
            chunk = await reader.read(4096)
            if not chunk:
                return data
            data += chunk
            if sniff(data) is not None:
                return data

    def _push_breakpoints(self, wire: dict[str, Any]) -> None:
        """The cluster's breakpoints changed: every linked process arms the new set."""
        message = ArmBreakpoints(breakpoints=wire)
        for process in self.registry.all_processes():
            process.send(message)
        try:
            self.publish_breakpoints(None if self.cluster_sessions.cluster.empty else wire)
        except Exception as error:  # (Ray's errors are many) the linked processes have them
            log.warning("could not publish the cluster's breakpoints: %s", error)

    async def _serve_dap(self, reader: asyncio.StreamReader, writer: Any, first: bytes,
                         client_token: str | None) -> None:
        """Serve one DAP client (a TCP client, the page's WebSocket) whose ``first`` bytes
        were read, until it leaves; with ``client_token``, its ``attach`` must carry it."""
        handler = ClientHandler(self.registry, self.data_connections,
                                self.config.allow_terminate, reader, writer, first,
                                peer_name(writer), self.cluster_sessions, client_token,
                                self.queries, snapshots=self.snapshots)
        await handler.run()
