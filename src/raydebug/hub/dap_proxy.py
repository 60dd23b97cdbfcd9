"""One DAP client connection: choose a session, then relay to that process's pydevd.

Theory of operation. Until ``attach`` the hub is the debug adapter: it answers
``initialize`` itself (with pydevd's capabilities) because it does not yet know which process
the client wants. ``attach`` names a session (``"raydebug": {"session": id}``) or takes the
oldest waiting one, waiting for the next breakpoint if there is none. The hub then asks the
agent for a data channel, replays the client's ``initialize`` to pydevd (dropping the answer
the client already has) and forwards ``attach``. From there bytes are relayed unchanged,
except that:

- the answer to ``configurationDone`` is followed by ``ClientReady`` to the agent, which
  releases the paused threads (pydevd then sends ``stopped``) or replays old stops;
- requests from the debuggee side (reverse requests such as ``runInTerminal``) are refused,
  never passed to the client (security: the client may run them);
- ``terminate`` and ``disconnect{terminateDebuggee: true}`` never kill the process unless
  the hub was started with ``--allow-terminate``;
- when the process dies or its channel drops, every request pydevd had not answered gets
  its answer from the hub (see :mod:`.outstanding`), then the client gets ``terminated``;
  requests sent after that are answered by the hub too;
- when the channel closes while it is being set up, the attach fails with the reason the
  agent gave (``ChannelFailed``) and the session stays waiting, attachable again.
- when a session of the process starts or ends (the agent says why: a ``breakpoint()``
  elsewhere, or the function it paused in returned), the client gets the custom events
  ``raydebug/sessionStarted`` ``{session}`` and ``raydebug/sessionEnded``
  ``{session, thread, reason, returned}``: pydevd sends nothing when a thread leaves
  the code it traces.
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import logging
from dataclasses import replace
from typing import Any, cast

from ..errors import ChannelFailedError, RaydebugError, SessionBusyError, SessionNotFoundError
from ..protocol import DapConnection, Event, Message, Request, Response, mentions, parse_message
from ..protocol.paths import PathTranslator
from ..protocol.worker import ClientGone as ClientGoneMessage
from ..protocol.worker import ClientReady, OpenChannel
from .net import (
    RECV_SIZE,
    peer_host,
    read_next,
    revoke_this_connection,
    vouch_for_this_connection,
)
from .outstanding import OutstandingRequests
from .parent_session import ParentRegistry, ParentSession
from .registry import HubSession, Process, Registry
from .workers import DataChannel, PendingChannels

log = logging.getLogger("raydebug.hub")

# For each step of a channel's set-up. A process's first attach waits for pydevd to start
# (~0.2 s of CPU); on a busy node (70 processes pausing at once on 2 cores, measured) that
# took over 10 s, and failing the attach would leave the IDE without that process.
CHANNEL_TIMEOUT = 30.0
INJECTED_SEQ = 1_000_000_000  # requests the hub sends pydevd itself count from here

# Only pydevd's messages containing one of these are parsed by the relay; the rest pass as
# bytes. (The client's are all parsed: few, and each request is noted until its answer.)
WORKER_WORDS = (b'"request"', b'"configurationDone"', b'"terminated"')
AFTER_END_TIMEOUT = 5.0
# How long a channel that closed while being set up waits for the agent's ChannelFailed,
# which the agent posts on its control connection just after closing the data socket.
CHANNEL_FAILED_GRACE = 1.0
PROCESS_ENDED = "the debugged process has ended (it exited, was killed, or its channel closed)"

# pydevd's own answer to initialize (debugpy 1.8, in-process adapter), so that clients see
# the same debugger through the hub as they would directly.
PYDEVD_CAPABILITIES: dict[str, Any] = {
    "supportsConfigurationDoneRequest": True,
    "supportsConditionalBreakpoints": True,
    "supportsHitConditionalBreakpoints": True,
    "supportsEvaluateForHovers": True,
    "supportsSetVariable": True,
    "supportsGotoTargetsRequest": True,
    "supportsCompletionsRequest": True,
    "supportsModulesRequest": True,
    "supportsExceptionOptions": True,
    "supportsValueFormattingOptions": True,
    "supportsExceptionInfoRequest": True,
    "supportsDelayedStackTraceLoading": True,
    "supportsLogPoints": True,
    "supportsSetExpression": True,
    "supportsClipboardContext": True,
    "supportsFunctionBreakpoints": True,
    "supportsStepInTargetsRequest": True,
    "exceptionBreakpointFilters": [
        {"filter": "raised", "label": "Raised Exceptions", "default": False},
        {"filter": "uncaught", "label": "Uncaught Exceptions", "default": True},
        {"filter": "userUnhandled", "label": "User Uncaught Exceptions", "default": False},
    ],
}


class PeerClosed(Exception):
    """The client (or, in the relay, the worker's channel) closed its connection."""


class ClientSession:
    """Serves one DAP client connection from its first bytes to its close."""

    def __init__(self, registry: Registry, channels: PendingChannels, allow_terminate: bool,
                 reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                 first_bytes: bytes, peer: str, parents: ParentRegistry,
                 client_token: str | None = None) -> None:
        self._client_token = client_token
        self._registry = registry
        self._parents = parents
        self._injected: set[int] = set()  # seqs of requests the hub sent pydevd itself
        # Sessions that existed when the client sent disconnect: pydevd resumes all their
        # threads, so they end with the client (not a moment later, when the agent says so,
        # which let the next client pick a session that was already running on).
        self._resumed_by_disconnect: list[str] = []
        self._channels = channels
        self._allow_terminate = allow_terminate
        self._reader = reader
        self._writer = writer
        self._peer = peer
        self._client = DapConnection()
        self._client.receive_data(first_bytes)
        self._worker = DapConnection()
        self._initialize: Request | None = None
        self._process: Process | None = None
        self._channel: DataChannel | None = None
        self._channel_id = 0
        self._configuration_done_seq: int | None = None
        self._outstanding = OutstandingRequests()
        self._ended = False  # the channel has closed: the hub answers every request
        self._terminated_sent = False
        self._vouched = False  # no longer counted toward its address's connection limit
        self._paths: PathTranslator | None = None  # the client's localRoot <-> remote_root

    async def run(self) -> None:
        """Serve the client until it leaves; always releases the process and the channel."""
        try:
            session = await self._until_attach()
            if session is not None:
                await self._relay()
        except PeerClosed:
            pass
        except RaydebugError as error:
            log.warning("client %s: %s; connection closed", self._peer, error)
            await self._say(f"raydebug hub: {error}; closing the connection")
        finally:
            await self._release()

    # -- before attach: the hub is the adapter ----------------------------------------------

    async def _until_attach(self) -> HubSession | None:
        while True:
            message = await self.next_client_message()
            if not isinstance(message, Request):
                continue
            if message.command == "initialize":
                self._initialize = message
                self.respond(message, body=self._capabilities())
            elif message.command == "attach":
                if not self._token_ok(message):
                    self.fail(message, "this hub requires its client token: add "
                                       '"raydebug": {"token": "<token>"} to the attach '
                                       "configuration")
                    return None
                if self._wants_cluster_session(message):
                    await ParentSession(self, self._registry, self._parents, message).run()
                    return None
                session = await self._attach(message)
                if session is not None:
                    return session
            elif message.command in ("disconnect", "terminate"):
                self.respond(message)
                return None
            elif message.command == "launch":
                self.fail(message, "raydebug attaches to paused processes: use "
                                    '"request": "attach" with the hub\'s host and port')
            else:
                self.fail(message, f"{message.command!r} before attach: attach to a session first")

    def _token_ok(self, attach: Request) -> bool:
        if self._client_token is None:
            return True
        key = attach.arguments.get("raydebug")
        given = key.get("token") if isinstance(key, dict) else None
        return isinstance(given, str) and hmac.compare_digest(given.encode(),
                                                              self._client_token.encode())

    def _wants_cluster_session(self, attach: Request) -> bool:
        """No session chosen, and a client that can open child sessions (see parent_session)."""
        key = attach.arguments.get("raydebug")
        if isinstance(key, dict) and key.get("session") is not None:
            return False
        initialize = self._initialize.arguments if self._initialize else {}
        return bool(initialize.get("supportsStartDebuggingRequest"))

    def _capabilities(self) -> dict[str, Any]:
        capabilities = dict(PYDEVD_CAPABILITIES)
        capabilities["supportTerminateDebuggee"] = self._allow_terminate
        capabilities["supportsTerminateRequest"] = self._allow_terminate
        return capabilities

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
                    self.fail(request, str(error))
                    return None
                # Someone else took the oldest waiting session between our look and our
                # attach: look again.
            except SessionNotFoundError as error:
                self.fail(request, str(error))
                return None
        self._process = session.process
        self._process.on_lost.append(self._on_process_lost)
        if self._parents.is_live(key.get("parent") if isinstance(key, dict) else None):
            # A cluster session's child, now bound to its process (one client each): it has
            # proven it belongs and must not count toward its address's connection limit
            # (net.PeerLimit), or one IDE could not debug more processes than that.
            vouch_for_this_connection()
            self._vouched = True
        self._paths = PathTranslator.for_attach(request.arguments, session.record.remote_root)
        self._process.on_session_started.append(self._on_session_started)
        self._process.on_session_ended.append(self._on_session_ended)
        try:
            await self._open_channel(request)
        except (RaydebugError, TimeoutError, OSError) as error:
            reason = str(error) or type(error).__name__
            log.warning("client %s: cannot reach session %s (pid %s): %s", self._peer,
                        session.record.id, session.record.pid, reason)
            self.fail(request, f"cannot reach session {session.record.id}: {reason}")
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
        await self._say("raydebug: waiting for a breakpoint...")
        return await self._until_client_gone(self._registry.wait_for_waiting())

    async def _abandon_channel(self) -> None:
        """After a failed attach: release the process and its channel, and be ready for the
        client's next attach (the session is waiting again)."""
        assert self._process is not None
        # The agent may have handed the channel to pydevd before it failed here: tell it the
        # client has gone, or the process would stay traced for nobody.
        self._process.send(ClientGoneMessage(channel=self._channel_id))
        if self._on_process_lost in self._process.on_lost:
            self._process.on_lost.remove(self._on_process_lost)
        await self._registry.detach(self._process, self)
        self._process = None
        if self._vouched:  # bound to no process any more
            revoke_this_connection()
            self._vouched = False
        if self._channel is not None:
            self._channel.writer.close()
            self._channel.done.set()
            self._channel = None
        self._worker = DapConnection()
        self._injected.clear()

    async def _open_channel(self, attach: Request) -> None:
        """Ask the agent for a data channel and replay the client's set-up on it.

        Raises :class:`ChannelFailedError` with the agent's reason when it could not serve
        the channel, TimeoutError or OSError. The caller forgets the channel id.
        """
        assert self._process is not None
        self._channel_id, future = self._channels.expect()
        self._process.send(OpenChannel(channel=self._channel_id))
        try:
            self._channel = await asyncio.wait_for(future, CHANNEL_TIMEOUT)
        except TimeoutError:
            raise TimeoutError(f"the process opened no channel within {CHANNEL_TIMEOUT:g}s "
                               "(is it busy?)") from None
        if self._channel.leftover:
            self._worker.receive_data(self._channel.leftover)
        initialize = self._initialize or Request(seq=0, command="initialize",
                                                 arguments={"adapterID": "raydebug"})
        self._to_worker(initialize)
        try:
            await asyncio.wait_for(self._drop_initialize_response(initialize), CHANNEL_TIMEOUT)
        except TimeoutError:
            raise TimeoutError(f"pydevd did not answer initialize within {CHANNEL_TIMEOUT:g}s "
                               "(is the process busy?)") from None
        self._to_worker(attach)
        self._outstanding.forwarded(attach)
        key = attach.arguments.get("raydebug")
        # A child of a cluster session gets the breakpoints set on its parent (pydevd takes
        # them only after attach). Their answers are for the hub, not for the client.
        for number, request in enumerate(
                self._parents.breakpoints_for(key.get("parent") if isinstance(key, dict)
                                              else None), start=INJECTED_SEQ):
            self._injected.add(number)
            arguments = (self._paths.arguments_to_remote(request.arguments) if self._paths
                         else request.arguments)
            self._to_worker(Request(seq=number, command=request.command, arguments=arguments))

    async def _drop_initialize_response(self, initialize: Request) -> None:
        while True:
            message = await self._next_worker_message()
            if message is None:
                # The agent closes the socket first, then says why on its control connection.
                reason = await self._channels.wait_failure(self._channel_id,
                                                           CHANNEL_FAILED_GRACE)
                raise ChannelFailedError(reason or "the process closed its channel")
            if isinstance(message, Response) and message.request_seq == initialize.seq:
                return

    # -- after attach: relay ----------------------------------------------------------------

    async def _relay(self) -> None:
        from_client = asyncio.ensure_future(self._client_to_worker())
        from_worker = asyncio.ensure_future(self._worker_to_client())
        try:
            done, _ = await asyncio.wait({from_client, from_worker},
                                         return_when=asyncio.FIRST_COMPLETED)
            if from_worker in done and not from_client.done():
                # The debuggee is gone: answer what it did not, and the client's goodbye.
                self._end_of_process()
                with contextlib.suppress(OSError):
                    await self._writer.drain()
                await asyncio.wait({from_client}, timeout=AFTER_END_TIMEOUT)
            for task in done:
                task.result()  # re-raise a protocol error
        finally:
            for task in (from_client, from_worker):
                task.cancel()
            await asyncio.gather(from_client, from_worker, return_exceptions=True)

    async def _client_to_worker(self) -> None:
        while True:
            try:
                body = await self._next_body(self._client, self._reader)
            except PeerClosed:
                return
            if self._paths is not None:
                body = self._paths.to_remote(body)
            message = parse_message(body)
            if self._ended or self._channel is None or self._channel.writer.is_closing():
                self._answer_after_end(message)
                continue
            if isinstance(message, Request):
                request = self._police(message)
                if request is None:
                    continue
                if request.command == "configurationDone":
                    self._configuration_done_seq = request.seq
                elif request.command == "disconnect" and self._process is not None:
                    self._resumed_by_disconnect = list(self._process.sessions)
                self._outstanding.forwarded(request)
                message = request
            self._to_worker(message)
            try:
                await self._channel.writer.drain()
            except OSError:
                pass  # the channel broke: the worker side ends and answers what is outstanding

    def _police(self, request: Request) -> Request | None:
        """Apply the hub's rules to a client request; None when the hub answered it."""
        if self._allow_terminate:
            return request
        if request.command == "terminate":
            self.fail(request, "this hub does not terminate debuggees (start it with "
                                "--allow-terminate); disconnect to let the process run on")
            return None
        if request.command == "disconnect" and request.arguments.get("terminateDebuggee"):
            arguments = {**request.arguments, "terminateDebuggee": False}
            return replace(request, arguments=arguments, raw=None)
        return request

    def _end_of_process(self) -> None:
        """The channel has closed: answer every request pydevd left unanswered, then say
        ``terminated`` (once; pydevd may have said it already)."""
        self._ended = True
        for request in self._outstanding.take_all():
            self._answer_after_end(request)
        if not self._terminated_sent:
            self._terminated_sent = True
            self._send_client(Event(seq=0, event="terminated"))

    def _answer_after_end(self, message: Message) -> None:
        """Answer a request the process can no longer answer: ``disconnect`` succeeds
        (there is nothing left to detach from), anything else fails saying why."""
        if isinstance(message, Request):
            if message.command == "disconnect":
                self.respond(message)
            else:
                self.fail(message, PROCESS_ENDED)

    async def _worker_to_client(self) -> None:
        assert self._process is not None and self._channel is not None
        while True:
            try:
                body = await self._next_body(self._worker, self._channel.reader)
            except (PeerClosed, OSError):
                return
            self._outstanding.answered(body)
            if self._paths is not None:
                body = self._paths.to_local(body)
            if not self._injected and not mentions(body, WORKER_WORDS):
                self._writer.write(self._client.send_body(body))  # the fast path
                await self._writer.drain()
                continue
            message = parse_message(body)
            if isinstance(message, Response) and message.request_seq in self._injected:
                self._injected.discard(message.request_seq)
                continue
            if isinstance(message, Request):
                self._to_worker(Response(seq=0, request_seq=message.seq, command=message.command,
                                         success=False, message="refused by the raydebug hub"))
                continue
            if isinstance(message, Event) and message.event == "terminated":
                self._terminated_sent = True
            self._send_client(message, renumber=False)
            if (isinstance(message, Response) and message.command == "configurationDone"
                    and message.request_seq == self._configuration_done_seq):
                self._process.send(ClientReady(channel=self._channel_id))
            await self._writer.drain()

    def _on_process_lost(self) -> None:
        # During the set-up, the attach fails at once with this reason (not after a grace).
        self._channels.fail(self._channel_id, "the process has ended")
        if self._channel is not None:
            self._channel.writer.close()

    def _on_session_started(self, session: HubSession) -> None:
        self._send_client(Event(seq=0, event="raydebug/sessionStarted",
                                body={"session": session.to_dict()}))

    def _on_session_ended(self, session: HubSession, reason: str, returned: str) -> None:
        self._send_client(Event(seq=0, event="raydebug/sessionEnded", body={
            "session": session.record.id, "thread": session.record.thread,
            "reason": reason, "returned": returned}))

    # -- I/O helpers ------------------------------------------------------------------------

    async def next_client_message(self) -> Message:
        """The client's next message; raises :class:`PeerClosed` when it has gone."""
        message = await read_next(self._reader, self._client.receive_data,
                                  self._client.next_event)
        if message is None:
            raise PeerClosed
        return cast(Message, message)  # mypy cannot solve T for a union

    @staticmethod
    async def _next_body(connection: DapConnection, reader: asyncio.StreamReader) -> bytes:
        """The next message body from ``reader``; raises :class:`PeerClosed` at its end."""
        body = await read_next(reader, connection.receive_data, connection.next_body)
        if body is None:
            raise PeerClosed
        return body

    async def _next_worker_message(self) -> Message | None:
        """pydevd's next message; None when the channel has closed or broken."""
        assert self._channel is not None
        try:
            return await read_next(self._channel.reader, self._worker.receive_data,
                                   self._worker.next_event)
        except OSError:
            return None

    async def _until_client_gone(self, waiting: Any) -> HubSession:
        """Await ``waiting`` unless the client leaves first (then raise :class:`PeerClosed`)."""
        wait_task = asyncio.ensure_future(waiting)
        read_task = asyncio.ensure_future(self._reader.read(RECV_SIZE))
        try:
            while True:
                await asyncio.wait({wait_task, read_task}, return_when=asyncio.FIRST_COMPLETED)
                if wait_task.done():
                    return wait_task.result()  # type: ignore[no-any-return]
                data = read_task.result()
                if not data:
                    raise PeerClosed
                self._client.receive_data(data)  # kept for after the attach
                read_task = asyncio.ensure_future(self._reader.read(RECV_SIZE))
        finally:
            for task in (wait_task, read_task):
                task.cancel()

    def _to_worker(self, message: Message) -> None:
        assert self._channel is not None
        self._channel.writer.write(self._worker.send(message))

    def send_event(self, event: Event) -> None:
        self._send_client(event)

    def send_request(self, request: Request) -> None:
        """A reverse request to the client (its response is read and ignored)."""
        self._send_client(request)

    def _send_client(self, message: Message, renumber: bool = True) -> None:
        if not self._writer.is_closing():
            self._writer.write(self._client.send(message, renumber=renumber))

    def respond(self, request: Request, body: dict[str, Any] | None = None) -> None:
        self._send_client(Response(seq=0, request_seq=request.seq, command=request.command,
                                   body=body or {}))

    def fail(self, request: Request, text: str) -> None:
        self._send_client(Response(
            seq=0, request_seq=request.seq, command=request.command, success=False,
            message=text, body={"error": {"id": 1, "format": text, "showUser": True}}))

    @property
    def peer_host(self) -> str | None:
        """The client's IP address; None on a Unix socket."""
        return peer_host(self._writer)

    def say_now(self, text: str) -> None:
        """A line on the client's debug console, without waiting for it to be sent."""
        self._send_client(Event(seq=0, event="output",
                                body={"category": "console", "output": text + "\n"}))

    async def _say(self, text: str) -> None:
        self.say_now(text)
        with contextlib.suppress(OSError):
            await self._writer.drain()

    async def _release(self) -> None:
        if self._process is not None and self._channel is not None:
            self._process.send(ClientGoneMessage(channel=self._channel_id))
        if self._process is not None:
            process = self._process
            if self._on_process_lost in process.on_lost:
                process.on_lost.remove(self._on_process_lost)
            if self._on_session_started in process.on_session_started:
                process.on_session_started.remove(self._on_session_started)
            if self._on_session_ended in process.on_session_ended:
                process.on_session_ended.remove(self._on_session_ended)
            await self._registry.detach(self._process, self)
            for session_id in self._resumed_by_disconnect:
                await self._registry.end_session(self._process, session_id)
        if self._channel is not None:
            self._channel.writer.close()
            self._channel.done.set()
