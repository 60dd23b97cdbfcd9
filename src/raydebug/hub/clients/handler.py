"""One DAP client connection, from its first bytes to its close: attach, then relay.

Theory of operation. Until ``attach`` the hub is the debug adapter: it answers
``initialize`` itself (with pydevd's capabilities) because it does not yet know which process
the client wants. Each request gets one answer, from the ``<command>_request`` method of
:class:`ClientHandler` named after it (as debugpy's adapter dispatches); a command with no
such method fails ("attach to a session first"). ``attach`` names a session
(``"raydebug": {"session": id}``) or takes the oldest waiting one, waiting for the next
breakpoint if there is none; or, from a client that can open child sessions and names none,
it becomes a cluster attach (:mod:`.cluster_attach`) served on this connection until it
leaves. An attach with ``"raydebug": {"group": ...}`` is a group session
(:mod:`.group_session`), served likewise; one naming a kept snapshot's id is that snapshot's
read-only session (:mod:`.snapshot_view`), with no process behind it.

Attaching binds the connection to the session's process (one client per process: pydevd
serves one) and opens a data connection: the hub asks the agent for it, replays the client's
``initialize`` to pydevd (dropping the answer the client already has) and forwards
``attach``. From there :class:`.relay.Relay` carries messages both ways under the data
connection's :class:`~raydebug.protocol.proxy_policy.ProxyPolicy` (one per data connection).

Every attached DAP session (a plain DAP client's, ``raydebug attach``'s, the web page's, a
child session) has the hub's breakpoint set in its pydevd, beside its client's own
breakpoints, because while a client debugs a process its arming stands down and only
pydevd's breakpoints stop it: sent right after ``attach`` (pydevd takes breakpoints only
then), after each breakpoint request of the client (which pydevd answers; it replaces that
file's or kind's) and after each change of the set (:meth:`.ClusterSessions.follow`), what
differs each time, the answers swallowed
(:class:`~raydebug.hub.cluster_breakpoints.DapSessionBreakpoints`).

When the data connection closes while it is being set up, the attach fails with the reason
the agent gave (``DataConnectionFailed``), the session stays waiting and the client may attach
again. However the connection ends, :meth:`ClientHandler.run` releases the process and the
data connection.
"""

from __future__ import annotations

import asyncio
import hmac
import logging
from collections.abc import Callable

from ...errors import (
    ChannelFailedError,
    PeerClosed,
    RaydebugError,
    SelectorError,
    SessionBusyError,
    SessionNotFoundError,
)
from ...protocol import Event, Request, Response
from ...protocol.control import ClientGone as ClientGoneMessage
from ...protocol.control import OpenDataConnection
from ...protocol.paths import PathTranslator
from ...protocol.proxy_policy import ProxyPolicy, adapter_capabilities
from ...snapshots.format import Snapshot
from ..agents.data_connections import PendingDataConnections
from ..agents.data_stream import DataStream
from ..cluster_breakpoints import DapSessionBreakpoints
from ..entries import HubSession, Process
from ..net import revoke_this_connection, vouch_for_this_connection
from ..processes import ProcessQueries
from ..registry import Registry
from ..snapshot_store import SnapshotStore
from .cluster_attach import ClusterAttach
from .cluster_sessions import ClusterSessions
from .group_session import GroupSession, group_selector, wants_group
from .relay import Relay
from .snapshot_view import SnapshotView, wanted_id
from .stream import ClientStream

log = logging.getLogger("raydebug.hub")

# For each step of a data connection's set-up. A process's first attach waits for pydevd to
# start, over 10 s on a busy node (docs/design.md#attach-under-load), and failing the attach
# would leave the IDE without that process.
SET_UP_TIMEOUT = 30.0
# How long a data connection that closed while being set up waits for the agent's
# DataConnectionFailed, which the agent posts on its control connection just after closing it.
FAILED_GRACE = 1.0
TOKEN_NEEDED = ('this hub requires its client token: add "raydebug": {"token": "<token>"} '
                "to the attach configuration")


class ClientHandler:
    """Serves one DAP client connection from its first bytes to its close."""

    def __init__(self, registry: Registry, data_connections: PendingDataConnections,
                 allow_terminate: bool, reader: asyncio.StreamReader,
                 writer: asyncio.StreamWriter, first_bytes: bytes, peer: str,
                 cluster_sessions: ClusterSessions, client_token: str | None = None,
                 queries: ProcessQueries | None = None,
                 snapshots: SnapshotStore | None = None) -> None:
        self._client_token = client_token
        self._snapshots = snapshots  # the hub's kept snapshots
        self._queries = queries  # live processes' stacks and pauses (a group session's)
        self._registry = registry
        self._cluster_sessions = cluster_sessions
        self._data_connections = data_connections
        self._allow_terminate = allow_terminate
        self._peer = peer
        self._client = ClientStream(reader, writer, first_bytes)
        self._initialize: Request | None = None
        self._process: Process | None = None
        self._session_root: str | None = None  # where the session's code lives (Ray)
        self._debugger: DataStream | None = None  # the data connection to pydevd
        self._data_id = 0  # its number (the agent's OpenDataConnection)
        self._relay: Relay | None = None  # once the data connection is open
        self._vouched = False  # no longer counted toward its address's connection limit
        self._parent: str | None = None  # a child session's cluster session (its key)
        self._breakpoints: DapSessionBreakpoints | None = None  # what its pydevd was sent
        self._unfollow: Callable[[], None] = lambda: None

    async def run(self) -> None:
        """Serve the client until it leaves; always releases the process and the data
        connection."""
        try:
            await self._until_attach()
            if self._relay is not None:
                await self._relay.run()
        except PeerClosed:
            pass
        except RaydebugError as error:
            log.warning("client %s: %s; connection closed", self._peer, error)
            await self._client.say(f"raydebug hub: {error}; closing the connection")
        finally:
            await self._release()

    # -- before attach: the hub is the adapter ----------------------------------------------

    async def _until_attach(self) -> None:
        """Answer the client's requests until one ends this phase: attached (``_relay`` is
        ready), served as a cluster session until it left, or the client said goodbye. Each
        ``<command>_request`` answers its request once and returns True when the phase is
        over (``attach_request``, which waits, is a coroutine)."""
        while True:
            message = await self._client.next_client_message()
            if not isinstance(message, Request):
                continue
            answer = getattr(self, f"{message.command}_request", None)
            if answer is None:
                self._client.fail(message, f"{message.command!r} before attach: attach to a "
                                           "session first")
                continue
            over = answer(message)
            if asyncio.iscoroutine(over):
                over = await over
            if over:
                return

    def initialize_request(self, request: Request) -> bool:
        self._initialize = request
        self._client.respond(request, body=adapter_capabilities(self._allow_terminate))
        return False

    async def attach_request(self, request: Request) -> bool:
        """Serve the attach (see the module docstring); True unless the client may attach
        again (its attach failed: the error is its answer)."""
        if not self._token_ok(request):
            self._client.fail(request, TOKEN_NEEDED)
            return True
        if wants_group(request):
            try:
                selector = group_selector(request)
            except SelectorError as error:
                self._client.fail(request, str(error))
                return False
            await GroupSession(self._client, self._registry, self._data_connections,
                               self._cluster_sessions, self._allow_terminate, self._initialize,
                               request, selector, self._queries, self._snapshots).run()
            return True
        snapshot = self._wanted_snapshot(request)
        if snapshot is not None:
            key = request.arguments.get("raydebug")
            parent = key.get("parent") if isinstance(key, dict) else None
            if self._cluster_sessions.is_live(parent):
                # A cluster attach's child (see _attach): not counted toward the limit, and
                # its parent's offer of it taken.
                vouch_for_this_connection()
                self._cluster_sessions.child_attached(parent, snapshot.id)
            await SnapshotView(self._client, snapshot).run(request)
            return True
        if self._wants_cluster_attach(request):
            await ClusterAttach(self._client, self._registry, self._cluster_sessions,
                                request, self._snapshots).run()
            return True
        return await self._attach(request)

    def launch_request(self, request: Request) -> bool:
        self._client.fail(request, "raydebug attaches to paused processes: use "
                                   '"request": "attach" with the hub\'s host and port')
        return False

    def disconnect_request(self, request: Request) -> bool:
        self._client.respond(request)
        return True

    terminate_request = disconnect_request

    def _token_ok(self, attach: Request) -> bool:
        if self._client_token is None:
            return True
        key = attach.arguments.get("raydebug")
        given = key.get("token") if isinstance(key, dict) else None
        return isinstance(given, str) and hmac.compare_digest(given.encode(),
                                                              self._client_token.encode())

    def _wanted_snapshot(self, attach: Request) -> Snapshot | None:
        """The kept snapshot the attach names by id, if it names one."""
        wanted = wanted_id(attach)
        if wanted is None or self._snapshots is None:
            return None
        return self._snapshots.get(wanted)

    def _wants_cluster_attach(self, attach: Request) -> bool:
        """No session chosen, and a client that can open child sessions (see cluster_attach)."""
        key = attach.arguments.get("raydebug")
        if isinstance(key, dict) and key.get("session") is not None:
            return False
        initialize = self._initialize.arguments if self._initialize else {}
        return bool(initialize.get("supportsStartDebuggingRequest"))

    # -- attach: choose a session, open its data connection ---------------------------------

    async def _attach(self, request: Request) -> bool:
        """Bind to the chosen session and open its data connection: True; False (after an
        error response) when that is impossible."""
        key = request.arguments.get("raydebug")
        wanted = key.get("session") if isinstance(key, dict) else None
        while True:
            try:
                session = await self._choose(wanted)
                await self._registry.attach(session, self)
                break
            except SessionBusyError as error:
                if wanted is not None:
                    self._client.fail(request, str(error))
                    return False
                # Someone else took the oldest waiting session between our look and our
                # attach: look again.
            except SessionNotFoundError as error:
                self._client.fail(request, str(error))
                return False
        self._process = session.process
        self._session_root = session.record.remote_root
        self._subscribe(self._process)
        parent = key.get("parent") if isinstance(key, dict) else None
        if self._cluster_sessions.is_live(parent):
            self._parent = str(parent)
            # A cluster attach's child, now bound to its process (one client each): it has
            # proven it belongs and must not count toward its address's connection limit
            # (net.PeerLimit), or one IDE could not debug more processes than that.
            vouch_for_this_connection()
            self._vouched = True
        try:
            await self._open_data_connection(request)
        except (RaydebugError, TimeoutError, OSError) as error:
            reason = str(error) or type(error).__name__
            log.warning("client %s: cannot reach session %s (pid %s): %s", self._peer,
                        session.record.id, session.record.pid, reason)
            self._client.fail(request, f"cannot reach session {session.record.id}: {reason}")
            await self._abandon_data_connection()
            return False
        finally:
            self._data_connections.forget(self._data_id)
        log.info("client %s: attached to session %s (pid %s)", self._peer, session.record.id,
                 session.record.pid)
        return True

    async def _choose(self, wanted: object) -> HubSession:
        if wanted is not None:
            return self._registry.get(str(wanted))
        session = self._registry.oldest_waiting()
        if session is not None:
            return session
        await self._client.say("raydebug: waiting for a breakpoint...")
        chosen: HubSession = await self._client.until_client_gone(
            self._registry.wait_for_waiting())
        return chosen

    async def _open_data_connection(self, attach: Request) -> None:
        """Ask the agent for a data connection and replay the client's set-up on it; on
        success ``self._relay`` is ready to run.

        Raises :class:`ChannelFailedError` with the agent's reason when it could not serve
        the data connection, TimeoutError or OSError. The caller forgets its number.
        """
        assert self._process is not None
        self._data_id, future = self._data_connections.expect()
        self._process.send(OpenDataConnection(channel=self._data_id))
        try:
            debugger = DataStream(await asyncio.wait_for(future, SET_UP_TIMEOUT))
        except TimeoutError:
            raise TimeoutError(f"the process opened no data connection within "
                               f"{SET_UP_TIMEOUT:g}s (is it busy?)") from None
        self._debugger = debugger
        initialize = self._initialize or Request(seq=0, command="initialize",
                                                 arguments={"adapterID": "raydebug"})
        debugger.send(initialize)
        try:
            await asyncio.wait_for(self._drop_initialize_response(initialize), SET_UP_TIMEOUT)
        except TimeoutError:
            raise TimeoutError(f"pydevd did not answer initialize within {SET_UP_TIMEOUT:g}s "
                               "(is the process busy?)") from None
        policy = ProxyPolicy(self._allow_terminate)
        paths = PathTranslator.for_attach(attach.arguments, self._session_root)
        relay = Relay(self._client, debugger, policy, self._process, self._data_id, paths,
                      self._client_sent_breakpoints)
        relay.carry_out(policy.from_client(paths.request_to_remote(attach) if paths else attach))
        self._relay = relay
        self._breakpoints = DapSessionBreakpoints(self._session_root)
        self._bring_breakpoints_up()
        self._unfollow = self._cluster_sessions.follow(self._bring_breakpoints_up)

    def _bring_breakpoints_up(self) -> None:
        """The attached process's pydevd gets what changed of the breakpoint set (the answers
        are the hub's, not the client's)."""
        if self._relay is not None and self._breakpoints is not None:
            self._relay.inject(self._breakpoints.bring_up_to(self._cluster_sessions.cluster))

    def _client_sent_breakpoints(self, request: Request) -> None:
        """The client sent pydevd a breakpoint request: it replaced that file's (or kind's)
        breakpoints there, the set's among them; they are added back."""
        if self._breakpoints is not None:
            self._breakpoints.client_sent(request)
            self._bring_breakpoints_up()

    async def _drop_initialize_response(self, initialize: Request) -> None:
        assert self._debugger is not None
        while True:
            message = await self._debugger.next_message()
            if message is None:
                # The agent closes the socket first, then says why on its control connection.
                reason = await self._data_connections.wait_failure(self._data_id, FAILED_GRACE)
                raise ChannelFailedError(reason or "the process closed its data connection")
            if isinstance(message, Response) and message.request_seq == initialize.seq:
                return

    def _subscribe(self, process: Process) -> None:
        process.on_lost.append(self._on_process_lost)
        process.on_session_started.append(self._on_session_started)
        process.on_session_ended.append(self._on_session_ended)

    def _unsubscribe(self, process: Process) -> None:
        for callbacks, callback in ((process.on_lost, self._on_process_lost),
                                    (process.on_session_started, self._on_session_started),
                                    (process.on_session_ended, self._on_session_ended)):
            if callback in callbacks:
                callbacks.remove(callback)  # type: ignore[arg-type]

    def _on_session_started(self, session: HubSession) -> None:
        # pydevd says nothing of a thread pausing elsewhere in raydebug, or of one leaving
        # the code it traces: the client hears it from the hub (custom DAP events).
        self._client.send_event(Event(seq=0, event="raydebug/sessionStarted",
                                      body={"session": session.to_dict()}))

    def _on_session_ended(self, session: HubSession, reason: str, returned: str) -> None:
        self._client.send_event(Event(seq=0, event="raydebug/sessionEnded", body={
            "session": session.record.id, "thread": session.record.thread,
            "reason": reason, "returned": returned}))

    def _on_process_lost(self) -> None:
        # During the set-up, the attach fails at once with this reason (not after a grace).
        self._data_connections.fail(self._data_id, "the process has ended")
        if self._debugger is not None:
            self._debugger.close()

    # -- letting go -------------------------------------------------------------------------

    async def _abandon_data_connection(self) -> None:
        """After a failed attach: release the process and its data connection, and be ready
        for the client's next attach (the session is waiting again)."""
        assert self._process is not None
        # The agent may have handed the data connection to pydevd before it failed here:
        # tell it the client has gone, or the process would stay traced for nobody.
        self._process.send(ClientGoneMessage(channel=self._data_id))
        self._unsubscribe(self._process)
        await self._registry.detach(self._process, self)
        self._process = None
        if self._vouched:  # bound to no process any more
            revoke_this_connection()
            self._vouched = False
        self._stop_following()
        if self._debugger is not None:
            self._debugger.finish()
            self._debugger = None
        self._relay = None

    def _stop_following(self) -> None:
        self._unfollow()
        self._unfollow = lambda: None
        self._breakpoints = None
        self._parent = None

    async def _release(self) -> None:
        self._stop_following()
        if self._process is not None and self._debugger is not None:
            self._process.send(ClientGoneMessage(channel=self._data_id))
        if self._process is not None:
            self._unsubscribe(self._process)
            await self._registry.detach(self._process, self)
            resumed = self._relay.resumed_by_disconnect if self._relay is not None else []
            for session_id in resumed:
                await self._registry.end_session(self._process, session_id)
        if self._debugger is not None:
            self._debugger.finish()
