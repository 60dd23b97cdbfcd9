"""A DAP client and a pydevd joined through a :class:`ProxyPolicy`, in memory.

Like h11's ``tests/helpers.py`` ``ConnectionPair``: each side is a real
:class:`~raydebug.protocol.DapConnection`, messages go through real framing both ways, and
the hub's part is only the policy's decisions, carried out the way ``hub/clients/relay.py`` does.
A test says what one side sends and asserts on what each side received.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from raydebug.protocol import NEED_DATA, DapConnection, Message, Request
from raydebug.protocol.proxy_policy import (
    PASS,
    Action,
    ProxyPolicy,
    TellAgentPause,
    TellAgentReady,
    ThreadsResumed,
    ToClient,
    ToDebugger,
)


@dataclass
class Delivered:
    """What one send caused: the messages each side received, and the hub's other doings."""

    to_client: list[Message] = field(default_factory=list)
    to_worker: list[Message] = field(default_factory=list)
    agent_ready: bool = False  # ClientReady went to the agent
    agent_pauses: list[int] = field(default_factory=list)  # each Pause's expire_ms
    threads_resumed: bool = False
    unparsed: bool = False  # pydevd's body passed on the fast path, as bytes


class ProxyPair:
    """``client`` and ``worker`` are the two ends' own connections; the hub sits between."""

    def __init__(self, allow_terminate: bool = False) -> None:
        self.policy = ProxyPolicy(allow_terminate)
        self.client = DapConnection()
        self.worker = DapConnection()
        self._hub_client = DapConnection()  # the hub's side facing the client
        self._hub_worker = DapConnection()  # the hub's side facing pydevd
        self.data_connection_open = True

    def client_sends(self, *messages: Message) -> Delivered:
        delivered = Delivered()
        for message in messages:
            self._hub_client.receive_data(self.client.send(message))
            while (received := self._hub_client.next_event()) is not NEED_DATA:
                actions = self.policy.from_client(
                    received, data_connection_open=self.data_connection_open)
                self._carry_out(actions, delivered)
        return delivered

    def worker_sends(self, *messages: Message) -> Delivered:
        return self.worker_sends_bytes(*(self.worker.send(message) for message in messages))

    def worker_sends_bytes(self, *framed: bytes) -> Delivered:
        """pydevd's side sends already framed bytes (to send what is not valid DAP)."""
        delivered = Delivered()
        for data in framed:
            self._hub_worker.receive_data(data)
            while isinstance(body := self._hub_worker.next_body(), bytes):
                actions = self.policy.from_debugger(body)
                if actions is PASS:
                    delivered.unparsed = True
                    self._to_client(self._hub_client.send_body(body), delivered)
                else:
                    self._carry_out(actions, delivered)
        return delivered

    def channel_closes(self) -> Delivered:
        delivered = Delivered()
        self._carry_out(self.policy.data_connection_closed(), delivered)
        return delivered

    def _carry_out(self, actions: Sequence[Action], delivered: Delivered) -> None:
        for action in actions:
            if isinstance(action, ToClient):
                self._to_client(self._hub_client.send(action.message,
                                                      renumber=not action.forwarded),
                                delivered)
            elif isinstance(action, ToDebugger):
                self.worker.receive_data(self._hub_worker.send(action.message))
                while (received := self.worker.next_event()) is not NEED_DATA:
                        delivered.to_worker.append(received)
            elif isinstance(action, TellAgentReady):
                delivered.agent_ready = True
            elif isinstance(action, TellAgentPause):
                delivered.agent_pauses.append(action.expire_ms)
            elif isinstance(action, ThreadsResumed):
                delivered.threads_resumed = True

    def _to_client(self, data: bytes, delivered: Delivered) -> None:
        self.client.receive_data(data)
        while (received := self.client.next_event()) is not NEED_DATA:
            delivered.to_client.append(received)

    def hub_injects(self, *requests: Request) -> Delivered:
        """The hub sends pydevd requests of its own (a cluster child's breakpoints)."""
        delivered = Delivered()
        self._carry_out(self.policy.inject(list(requests)), delivered)
        return delivered
