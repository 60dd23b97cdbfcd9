"""One DAP client connection, from its first bytes to its close: attach, then relay.

Theory of operation. Until ``attach`` the hub is the debug adapter: it answers
``initialize`` itself (with pydevd's capabilities) because it does not yet know which process
the client wants. ``attach`` names a session (``"raydebug": {"session": id}``) or takes the
oldest waiting one, waiting for the next breakpoint if there is none; or, from a client that
can open child sessions and names none, it becomes a cluster attach (:mod:`.cluster_attach`)
served on this connection until it leaves.

Attaching binds the connection to the session's process (one client per process: pydevd
serves one) and opens a data channel: the hub asks the agent for it, replays the client's
``initialize`` to pydevd (dropping the answer the client already has), forwards ``attach``,
and sends a cluster child the breakpoints set on its parent. From there :class:`.relay.Relay`
carries messages both ways under the channel's
:class:`~raydebug.protocol.proxy_policy.ProxyPolicy` (one per channel).

When the channel closes while it is being set up, the attach fails with the reason the agent
gave (``ChannelFailed``), the session stays waiting and the client may attach again. However
the connection ends, :meth:`ClientConnection.run` releases the process and the channel.
"""

from __future__ import annotations

import asyncio
import hmac
import logging

from ...errors import (
    ChannelFailedError,
    PeerClosed,
    RaydebugError,
    SessionBusyError,
    SessionNotFoundError,
)
from ...protocol import Event, Request, Response
from ...protocol.control import ClientGone as ClientGoneMessage
from ...protocol.control import OpenChannel
from ...protocol.paths import PathTranslator
from ...protocol.proxy_policy import ProxyPolicy, adapter_capabilities
from ..agents.data_connections import PendingDataConnections
from ..agents.data_stream import DataStream
from ..net import revoke_this_connection, vouch_for_this_connection
from ..registry import HubSession, Process, Registry
from .cluster_attach import ClusterAttach, ClusterAttaches
from .relay import Relay
from .stream import ClientStream

log = logging.getLogger("raydebug.hub")

# For each step of a channel's set-up. A process's first attach waits for pydevd to start
# (~0.2 s of CPU); on a busy node (70 processes pausing at once on 2 cores, measured) that
# took over 10 s, and failing the attach would leave the IDE without that process.
CHANNEL_TIMEOUT = 30.0
# How long a channel that closed while being set up waits for the agent's ChannelFailed,
# which the agent posts on its control connection just after closing the data socket.
CHANNEL_FAILED_GRACE = 1.0


class ClientConnection:
    """Serves one DAP client connection from its first bytes to its close."""

    def __init__(self, registry: Registry, channels: PendingDataConnections, allow_terminate: bool,
                 reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                 first_bytes: bytes, peer: str, cluster_attaches: ClusterAttaches,
                 client_token: str | None = None) -> None:
        self._client_token = client_token
        self._registry = registry
        self._cluster_attaches = cluster_attaches
        self._channels = channels
        self._allow_terminate = allow_terminate
        self._peer = peer
        self._client = ClientStream(reader, writer, first_bytes)
        self._initialize: Request | None = None
        self._process: Process | None = None
        self._session_root: str | None = None  # where the session's code lives (Ray)
        self._channel: DataStream | None = None
        self._channel_id = 0
        self._relay: Relay | None = None  # once the channel is open
        self._vouched = False  # no longer counted toward its address's connection limit

    async def run(self) -> None:
        """Serve the client until it leaves; always releases the process and the channel."""
        try:
            session = await self._until_attach()
            if session is not None:
                assert self._relay is not None
                await self._relay.run()
        except PeerClosed:
            pass
        except RaydebugError as error:
            log.warning("client %s: %s; connection closed", self._peer, error)
            await self._client.say(f"raydebug hub: {error}; closing the connection")
        finally:
            await self._release()

    # -- before attach: the hub is the adapter ----------------------------------------------

    async def _until_attach(self) -> HubSession | None:
        client = self._client
        while True:
            message = await client.next_client_message()
            if not isinstance(message, Request):
                continue
            if message.command == "initialize":
                self._initialize = message
                client.respond(message, body=adapter_capabilities(self._allow_terminate))
            elif message.command == "attach":
                if not self._token_ok(message):
                    client.fail(message, "this hub requires its client token: add "
                                         '"raydebug": {"token": "<token>"} to the attach '
                                         "configuration")
                    return None
                if self._wants_cluster_attach(message):
                    await ClusterAttach(client, self._registry, self._cluster_attaches,
                                        message).run()
                    return None
                session = await self._attach(message)
                if session is not None:
                    return session
            elif message.command in ("disconnect", "terminate"):
                client.respond(message)
                return None
            elif message.command == "launch":
                client.fail(message, "raydebug attaches to paused processes: use "
                                     '"request": "attach" with the hub\'s host and port')
            else:
                client.fail(message,
                            f"{message.command!r} before attach: attach to a session first")

    def _token_ok(self, attach: Request) -> bool:
        if self._client_token is None:
            return True
        key = attach.arguments.get("raydebug")
        given = key.get("token") if isinstance(key, dict) else None
        return isinstance(given, str) and hmac.compare_digest(given.encode(),
                                                              self._client_token.encode())

    def _wants_cluster_attach(self, attach: Request) -> bool:
        """No session chosen, and a client that can open child sessions (see cluster_attach)."""
        key = attach.arguments.get("raydebug")
        if isinstance(key, dict) and key.get("session") is not None:
            return False
        initialize = self._initialize.arguments if self._initialize else {}
        return bool(initialize.get("supportsStartDebuggingRequest"))

    # -- attach: choose a session, open its channel -----------------------------------------

    async def _attach(self, request: Request) -> HubSession | None:
        """Bind to the chosen session and open its channel; None (after an error response)
        when that is impossible."""
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
                    return None
                # Someone else took the oldest waiting session between our look and our
                # attach: look again.
            except SessionNotFoundError as error:
                self._client.fail(request, str(error))
                return None
        self._process = session.process
        self._session_root = session.record.remote_root
        self._subscribe(self._process)
        if self._cluster_attaches.is_live(key.get("parent") if isinstance(key, dict) else None):
            # A cluster attach's child, now bound to its process (one client each): it has
            # proven it belongs and must not count toward its address's connection limit
            # (net.PeerLimit), or one IDE could not debug more processes than that.
            vouch_for_this_connection()
            self._vouched = True
        try:
            await self._open_channel(request)
        except (RaydebugError, TimeoutError, OSError) as error:
            reason = str(error) or type(error).__name__
            log.warning("client %s: cannot reach session %s (pid %s): %s", self._peer,
                        session.record.id, session.record.pid, reason)
            self._client.fail(request, f"cannot reach session {session.record.id}: {reason}")
            await self._abandon_channel()
            return None
        finally:
            self._channels.forget(self._channel_id)
        log.info("client %s: attached to session %s (pid %s)", self._peer, session.record.id,
                 session.record.pid)
        return session

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

    async def _open_channel(self, attach: Request) -> None:
        """Ask the agent for a data channel and replay the client's set-up on it; on success
        ``self._relay`` is ready to run.

        Raises :class:`ChannelFailedError` with the agent's reason when it could not serve
        the channel, TimeoutError or OSError. The caller forgets the channel id.
        """
        assert self._process is not None
        self._channel_id, future = self._channels.expect()
        self._process.send(OpenChannel(channel=self._channel_id))
        try:
            channel = DataStream(await asyncio.wait_for(future, CHANNEL_TIMEOUT))
        except TimeoutError:
            raise TimeoutError(f"the process opened no channel within {CHANNEL_TIMEOUT:g}s "
                               "(is it busy?)") from None
        self._channel = channel
        initialize = self._initialize or Request(seq=0, command="initialize",
                                                 arguments={"adapterID": "raydebug"})
        channel.send(initialize)
        try:
            await asyncio.wait_for(self._drop_initialize_response(initialize), CHANNEL_TIMEOUT)
        except TimeoutError:
            raise TimeoutError(f"pydevd did not answer initialize within {CHANNEL_TIMEOUT:g}s "
                               "(is the process busy?)") from None
        policy = ProxyPolicy(self._allow_terminate)
        paths = PathTranslator.for_attach(attach.arguments, self._session_root)
        relay = Relay(self._client, channel, policy, self._process, self._channel_id, paths)
        if paths is not None:
            attach = paths.request_to_remote(attach)
        relay.carry_out(policy.from_client(attach))
        key = attach.arguments.get("raydebug")
        # A child of a cluster attach gets the breakpoints set on its parent (pydevd takes
        # them only after attach). Their answers are for the hub, not for the client.
        parent_breakpoints = self._cluster_attaches.breakpoints_for(
            key.get("parent") if isinstance(key, dict) else None)
        if paths is not None:
            parent_breakpoints = [paths.request_to_remote(request)
                                  for request in parent_breakpoints]
        relay.carry_out(policy.inject(parent_breakpoints))
        self._relay = relay

    async def _drop_initialize_response(self, initialize: Request) -> None:
        assert self._channel is not None
        while True:
            message = await self._channel.next_message()
            if message is None:
                # The agent closes the socket first, then says why on its control connection.
                reason = await self._channels.wait_failure(self._channel_id,
                                                           CHANNEL_FAILED_GRACE)
                raise ChannelFailedError(reason or "the process closed its channel")
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
        self._channels.fail(self._channel_id, "the process has ended")
        if self._channel is not None:
            self._channel.close()

    # -- letting go -------------------------------------------------------------------------

    async def _abandon_channel(self) -> None:
        """After a failed attach: release the process and its channel, and be ready for the
        client's next attach (the session is waiting again)."""
        assert self._process is not None
        # The agent may have handed the channel to pydevd before it failed here: tell it the
        # client has gone, or the process would stay traced for nobody.
        self._process.send(ClientGoneMessage(channel=self._channel_id))
        self._unsubscribe(self._process)
        await self._registry.detach(self._process, self)
        self._process = None
        if self._vouched:  # bound to no process any more
            revoke_this_connection()
            self._vouched = False
        if self._channel is not None:
            self._channel.finish()
            self._channel = None
        self._relay = None

    async def _release(self) -> None:
        if self._process is not None and self._channel is not None:
            self._process.send(ClientGoneMessage(channel=self._channel_id))
        if self._process is not None:
            self._unsubscribe(self._process)
            await self._registry.detach(self._process, self)
            resumed = self._relay.resumed_by_disconnect if self._relay is not None else []
            for session_id in resumed:
                await self._registry.end_session(self._process, session_id)
        if self._channel is not None:
            self._channel.finish()
