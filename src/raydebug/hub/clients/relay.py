"""The two pumps between a client and its process's pydevd, once the client has attached.

Theory of operation. :meth:`Relay.run` runs one task per direction and returns when either
ends. Each message goes through the data connection's
:class:`~raydebug.protocol.proxy_policy.ProxyPolicy` and the relay carries out what it decides
(:meth:`Relay.carry_out`); a body from pydevd the policy does not need to read
(:data:`~raydebug.protocol.proxy_policy.PASS`) is written to the client as it came, unparsed,
in the callback that received it (:mod:`raydebug.hub.agents.data_receiver`): the fast path of
every stackTrace, variables and evaluate. The client's messages, likewise, are carried out in
the callback that received them (:meth:`.stream.ClientStream.relay`).

Given ``breakpoints_sent``, the relay tells it each breakpoint request of the client once it
is on its way to pydevd (paths as the process names them), so that the hub can add the
breakpoint set's to what pydevd then has (:meth:`Relay.inject`).

Ends. When pydevd's side ends first (the process exited or was killed, its data connection
dropped), the client's outstanding requests are answered by the hub and it is told
``terminated``; the relay then waits up to :data:`AFTER_END_TIMEOUT` seconds for the client's
goodbye, answering whatever it sends meanwhile. When the client's side ends first the relay
returns at once. Either way both tasks are cancelled and awaited before :meth:`Relay.run`
returns; a protocol error in either direction is re-raised. The relay closes nothing: the
:class:`.handler.ClientHandler` that created it owns both sockets.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Iterable

from ...protocol import Message, Request
from ...protocol.control import ClientReady, Pause
from ...protocol.paths import PathTranslator
from ...protocol.proxy_policy import (
    PASS,
    Action,
    ProxyPolicy,
    TellAgentPause,
    TellAgentReady,
    ThreadsResumed,
    ToClient,
    ToDebugger,
)
from ..agents.data_stream import DataStream
from ..entries import Process
from .cluster_sessions import BREAKPOINT_REQUESTS
from .stream import ClientStream

AFTER_END_TIMEOUT = 5.0


class Relay:
    """Relays one attached client to one process's pydevd (``debugger``), the data
    connection the agent numbered ``data_id``."""

    def __init__(self, client: ClientStream, debugger: DataStream, policy: ProxyPolicy,
                 process: Process, data_id: int, paths: PathTranslator | None = None,
                 breakpoints_sent: Callable[[Request], None] | None = None) -> None:
        self._client = client
        self._paths = paths  # the client's localRoot <-> the session's remote_root
        self._debugger = debugger
        self._policy = policy
        self._process = process
        self._data_id = data_id
        self._breakpoints_sent = breakpoints_sent
        # Sessions that existed when the client sent disconnect: pydevd resumes all their
        # threads, so they end with the client (which let the next client pick a session
        # that was already running on, when they ended only as the agent said so).
        self.resumed_by_disconnect: list[str] = []

    def carry_out(self, actions: Iterable[Action]) -> None:
        """Do what the policy decided, in order (writes only: nothing here waits)."""
        for action in actions:
            if isinstance(action, ToClient):
                self._client.send(action.message, forwarded=action.forwarded)
            elif isinstance(action, ToDebugger):
                self._debugger.send(action.message)
            elif isinstance(action, TellAgentReady):
                self._process.send(ClientReady(channel=self._data_id))
            elif isinstance(action, TellAgentPause):
                # No answer is awaited (request id 0 is never asked): the client has had its
                # own, and a pause the agent cannot make is said on the process's stderr.
                self._process.send(Pause(request_id=0, expire_ms=action.expire_ms,
                                         by_client=True))
            elif isinstance(action, ThreadsResumed):
                self.resumed_by_disconnect = list(self._process.sessions)

    def inject(self, requests: list[Request]) -> None:
        """Send pydevd requests of the hub's own (their answers are swallowed); nothing once
        the data connection has ended."""
        if requests and not self._policy.ended and not self._debugger.closing:
            self.carry_out(self._policy.inject(requests))

    async def run(self) -> None:
        """Relay until either side ends (see the module's docstring)."""
        from_client = asyncio.ensure_future(self._client_to_debugger())
        from_debugger = asyncio.ensure_future(self._debugger_to_client())
        try:
            done, _ = await asyncio.wait({from_client, from_debugger},
                                         return_when=asyncio.FIRST_COMPLETED)
            if from_debugger in done and not from_client.done():
                # The debuggee is gone: answer what it did not, and the client's goodbye.
                self.carry_out(self._policy.data_connection_closed())
                await self._client.drain_quietly()
                await asyncio.wait({from_client}, timeout=AFTER_END_TIMEOUT)
            for task in done:
                task.result()  # re-raise a protocol error
        finally:
            for task in (from_client, from_debugger):
                task.cancel()
            await asyncio.gather(from_client, from_debugger, return_exceptions=True)

    async def _client_to_debugger(self) -> None:
        # Each message is carried out in the callback that received it (see
        # ClientStream.relay); the client is read no faster than pydevd takes what it is sent.
        await self._client.relay(self._from_client, self._debugger.backed_up,
                                 self._debugger_drained)

    def _from_client(self, message: Message) -> None:
        if self._paths is not None:
            message = self._paths.request_to_remote(message)
        actions = self._policy.from_client(message,
                                           data_connection_open=not self._debugger.closing)
        self.carry_out(actions)
        if (self._breakpoints_sent is not None and isinstance(message, Request)
                and message.command in BREAKPOINT_REQUESTS
                and any(isinstance(action, ToDebugger) for action in actions)):
            self._breakpoints_sent(message)

    async def _debugger_drained(self) -> None:
        with contextlib.suppress(OSError):  # it broke: pydevd's side ends and answers
            await self._debugger.drain()

    async def _debugger_to_client(self) -> None:
        # Each body is passed on in the callback that received it; pydevd is read no faster
        # than the client takes what it is sent.
        await self._debugger.relay(self._from_debugger, self._client.backed_up,
                                   self._client.drain)

    def _from_debugger(self, body: bytes) -> None:
        if self._paths is not None:
            body = self._paths.to_local(body)  # the same bytes unless a path is mapped
        actions = self._policy.from_debugger(body)
        if actions is PASS:
            self._client.send_body(body)  # the fast path
            return
        assert isinstance(actions, list)
        self.carry_out(actions)

