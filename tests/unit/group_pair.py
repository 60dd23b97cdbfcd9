"""A DAP client and many pydevds joined through a :class:`GroupPolicy`, in memory.

As :mod:`dap_pair` for one process: each end is a real
:class:`~raydebug.protocol.DapConnection`, messages go through real framing both ways, and
the hub's part is only the policy's decisions, carried out in order. The client's side
numbers what the hub sends it; each process's side receives what the policy numbered.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from raydebug.protocol import NEED_DATA, DapConnection, Event, Message, Request, Response
from raydebug.protocol.group_actions import (
    Action,
    AskThreads,
    HubAnswers,
    PauseProcess,
    PauseRunning,
    ProcessReady,
    ToClient,
    ToProcess,
)
from raydebug.protocol.group_policy import GroupPolicy
from raydebug.protocol.group_rewrite import Member
from raydebug.protocol.paths import PathTranslator


@dataclass
class Delivered:
    """What one send caused: what each end received, and the hub's other doings."""

    to_client: list[Message] = field(default_factory=list)
    to_process: dict[str, list[Message]] = field(default_factory=dict)
    paused: list[str] = field(default_factory=list)  # PauseProcess's keys
    paused_running: list[str] = field(default_factory=list)  # PauseRunning's keys
    asked_threads: list[str] = field(default_factory=list)  # AskThreads' keys
    ready: list[str] = field(default_factory=list)  # ProcessReady's keys
    hub_answers: list[Request] = field(default_factory=list)

    def requests_to(self, key: str) -> list[Request]:
        return [m for m in self.to_process.get(key, []) if isinstance(m, Request)]

    @property
    def responses(self) -> list[Response]:
        return [m for m in self.to_client if isinstance(m, Response)]

    @property
    def events(self) -> list[Event]:
        return [m for m in self.to_client if isinstance(m, Event)]


class GroupPair:
    """``client`` and each member's ``pydevd[key]`` are the ends' own connections."""

    def __init__(self, allow_terminate: bool = False, step_together: bool = False,
                 pause_together: bool = False) -> None:
        self.policy = GroupPolicy(allow_terminate, step_together, pause_together)
        self.client = DapConnection()
        self._hub_client = DapConnection()
        self.pydevd: dict[str, DapConnection] = {}
        self._hub_process: dict[str, DapConnection] = {}
        self._client_seq = 0
        self._idents: dict[str, int] = {}  # a running thread's name -> its ident
        self.now = 0.0  # the hub's clock, seconds: a test moves it

    # -- the client -------------------------------------------------------------------------

    def request(self, command: str, **arguments: object) -> Request:
        """The client's next request (numbered as a client numbers its own)."""
        self._client_seq += 1
        return Request(self._client_seq, command, dict(arguments))

    def client_sends(self, *messages: Message) -> Delivered:
        delivered = Delivered()
        for message in messages:
            self._hub_client.receive_data(self.client.send(message))
            while (received := self._hub_client.next_event()) is not NEED_DATA:
                self._carry_out(self.policy.from_client(received), delivered)
        return delivered

    # -- the processes ----------------------------------------------------------------------

    def join(self, member: Member, configuration: Sequence[Request] = (),
             paths: PathTranslator | None = None) -> Delivered:
        """``member``'s data connection opens and the hub sets its debugger up."""
        self.pydevd[member.key] = DapConnection()
        self._hub_process[member.key] = DapConnection()
        delivered = Delivered()
        self._carry_out(self.policy.join(member, {"adapterID": "raydebug"}, {"name": "g"},
                                         configuration, paths), delivered)
        return delivered

    def join_set_up(self, *members: Member) -> None:
        """Join each member and answer its set-up as pydevd does."""
        for member in members:
            sent = self.join(member).requests_to(member.key)
            while sent:
                sent = self.process_sends(member.key, *(self.answer(r) for r in sent)) \
                    .requests_to(member.key)

    def process_sends(self, key: str, *messages: Message) -> Delivered:
        delivered = Delivered()
        for message in messages:
            self._hub_process[key].receive_data(self.pydevd[key].send(message))
            while isinstance(body := self._hub_process[key].next_body(), bytes):
                self._carry_out(self.policy.from_process(key, body, self.now), delivered)
        return delivered

    def runs(self, member: Member) -> Delivered:
        """``member`` is a running live process of the group (no debugger connection)."""
        delivered = Delivered()
        self._carry_out(self.policy.runs(member), delivered)
        return delivered

    def agent_reports(self, key: str, *names: str) -> Delivered:
        """Running ``key``'s agent reports its threads: ``names`` (a name's ident is the
        same each time: 100, 101... as first named)."""
        delivered = Delivered()
        threads = [{"id": self._idents.setdefault(name, 100 + len(self._idents)),
                    "name": name, "frames": []} for name in names]
        self._carry_out(self.policy.running_threads(key, threads), delivered)
        return delivered

    def configure(self, key: str, *requests: Request) -> Delivered:
        """The breakpoint set changed: ``requests`` are what ``key``'s debugger lacks."""
        delivered = Delivered()
        self._carry_out(self.policy.configure(key, requests), delivered)
        return delivered

    def time_passes(self, seconds: float) -> Delivered:
        """The hub's clock moves on ``seconds`` and it flushes the output held since."""
        self.now += seconds
        delivered = Delivered()
        self._carry_out(self.policy.flush_partial(self.now), delivered)
        return delivered

    def process_leaves(self, key: str) -> Delivered:
        delivered = Delivered()
        self._carry_out(self.policy.left(key), delivered)
        return delivered

    @staticmethod
    def answer(request: Request, success: bool = True, message: str | None = None,
               **body: object) -> Response:
        """pydevd's answer to ``request`` (as it received it: its seq on that connection)."""
        return Response(900 + request.seq, request.seq, request.command, success=success,
                        message=message, body=dict(body))

    # -- the hub's part -----------------------------------------------------------------------

    def _carry_out(self, actions: Sequence[Action], delivered: Delivered) -> None:
        for action in actions:
            if isinstance(action, ToClient):
                self.client.receive_data(self._hub_client.send(action.message, renumber=True))
                while (received := self.client.next_event()) is not NEED_DATA:
                    delivered.to_client.append(received)
            elif isinstance(action, ToProcess):
                pydevd = self.pydevd[action.key]
                pydevd.receive_data(self._hub_process[action.key].send(action.message))
                while (received := pydevd.next_event()) is not NEED_DATA:
                    delivered.to_process.setdefault(action.key, []).append(received)
            elif isinstance(action, PauseProcess):
                delivered.paused.append(action.key)
            elif isinstance(action, PauseRunning):
                delivered.paused_running.append(action.key)
            elif isinstance(action, AskThreads):
                delivered.asked_threads.extend(action.keys)
            elif isinstance(action, ProcessReady):
                delivered.ready.append(action.key)
            elif isinstance(action, HubAnswers):
                delivered.hub_answers.append(action.request)


def stopped(thread: int = 1, **body: object) -> Event:
    return Event(5, "stopped", {"reason": "breakpoint", "threadId": thread, **body})


def group(*members: Member, step_together: bool = False) -> GroupPair:
    """A group whose members are set up and paused (thread 1 of each stopped)."""
    pair = GroupPair(step_together=step_together)
    pair.join_set_up(*members)
    for member in members:
        pair.process_sends(member.key, stopped())
    return pair


def client_thread_ids(pair: GroupPair) -> dict[str, int]:
    """The client's id of each process's thread 1, by a ``threads`` round."""
    sent = pair.client_sends(pair.request("threads"))
    for key, (request,) in ((k, sent.requests_to(k)) for k in sent.to_process):
        pair.process_sends(key, pair.answer(request, threads=[{"id": 1, "name": "MainThread"}]))
    return {key: pair.policy.ids.thread_to_client(key, 1) for key in sent.to_process}
