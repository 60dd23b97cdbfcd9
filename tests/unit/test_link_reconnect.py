"""The agent's hub link reconnecting, in memory: a dialer seam hands it socketpairs whose
other end is a hub's handshake on a thread (agent/link/hub_link.py). The real thing (a hub
process killed and restarted) is in tests/integration/test_live_processes.py."""

from __future__ import annotations

import queue
import socket
import threading
import time
from typing import Any

import pytest

from raydebug.agent.config import AgentConfig
from raydebug.agent.link import discovery
from raydebug.agent.link.discovery import HubAddress
from raydebug.agent.link.hub_link import HubLink
from raydebug.errors import AuthenticationError, RaydebugError
from raydebug.protocol import NEED_DATA
from raydebug.protocol.control import (
    ArmBreakpoints,
    CollectStacks,
    ControlConnection,
    ControlMessage,
    HubClosing,
    Identify,
    LogpointOutput,
    Pause,
    Paused,
    Register,
    SessionStarted,
    Stacks,
    encode_control,
)
from raydebug.protocol.handshake import HubHandshake

TOKEN = "seam-token"
CONFIG = AgentConfig(hub_host="127.0.0.1", hub_port=9, token=TOKEN, wait_timeout=None)


class MemoryHub:
    """Each dial is a socketpair; the hub's end runs the real handshake on a thread and
    queues what the agent sends. ``down``: dials are refused. ``token``: the hub's (one
    refused for the agent's is put in ``refusals``). ``mute``: connections are closed
    before the challenge (put in ``refusals`` too)."""

    def __init__(self) -> None:
        self.down = False
        self.token = TOKEN
        self.mute = False
        self.refusals: queue.Queue[str] = queue.Queue()
        self.dials: list[float] = []
        self.received: queue.Queue[tuple[int, ControlMessage]] = queue.Queue()
        self.sockets: list[socket.socket] = []

    def dial(self, address: tuple[str, int], timeout: float) -> socket.socket:
        self.dials.append(time.monotonic())
        if self.down:
            raise ConnectionRefusedError(111, "Connection refused")
        ours, theirs = socket.socketpair()
        self.sockets.append(ours)
        number = len(self.sockets)
        threading.Thread(target=self._serve, args=(ours, number), daemon=True).start()
        return theirs

    def _serve(self, sock: socket.socket, number: int) -> None:
        with sock:  # closed by this thread only (another's close could free a live fd)
            try:
                self._serve_connection(sock, number)
            except (OSError, RaydebugError):
                return  # the link went away: nothing to serve

    def _serve_connection(self, sock: socket.socket, number: int) -> None:
        if self.mute:
            self.refusals.put("closed before the challenge")
            return
        shake = HubHandshake(self.token)
        sock.sendall(shake.send())
        try:
            while shake.next_event() is NEED_DATA:
                shake.receive_data(sock.recv(65536))
        except AuthenticationError as error:  # as the hub does: say why, then close
            sock.sendall(shake.refuse(str(error)))
            self.refusals.put(str(error))
            return
        sock.sendall(shake.send())
        stream = ControlConnection()
        if leftover := shake.take_buffered():  # (b"" would say end of stream)
            stream.receive_data(leftover)
        try:
            while True:
                message = stream.next_event()
                if message is NEED_DATA:
                    data = sock.recv(65536)
                    if not data:
                        return
                    stream.receive_data(data)
                    continue
                if isinstance(message, Identify):  # as the hub does: its breakpoints first
                    sock.sendall(encode_control(ArmBreakpoints(breakpoints={})))
                self.received.put((number, message))
        except OSError:
            return

    def send(self, message: ControlMessage) -> None:
        self.sockets[-1].sendall(encode_control(message))

    def drop(self) -> None:
        """End the last connection (its thread sees the end and closes its socket)."""
        self.sockets[-1].shutdown(socket.SHUT_RDWR)

    def next(self, timeout: float = 5.0) -> tuple[int, ControlMessage]:
        return self.received.get(timeout=timeout)


class Handler:
    """The agent's side, as the link sees it."""

    def registration(self) -> Register:
        return Register(process={"pid": 4242, "labels": {"RANK": "1"}})

    def arm_breakpoints(self, breakpoints: dict[str, Any]) -> None: ...

    def live_sessions(self) -> list[SessionStarted]:
        return [SessionStarted(session={"id": "s1"})]

    def collect_stacks(self, request: CollectStacks) -> ControlMessage:
        return Stacks(request_id=request.request_id, threads=[{"id": 1}])

    def pause(self, request: Pause) -> ControlMessage:
        return Paused(request_id=request.request_id)

    def prepare_client(self) -> None: ...
    def serve_client(self, sock: Any) -> None: ...
    def on_client_attached(self) -> None: ...
    def on_client_ready(self) -> None: ...
    def on_client_detached(self) -> None: ...
    def on_hub_closing(self, reason: str) -> None: ...


def link(hub: MemoryHub, **seams: Any) -> HubLink:
    result = HubLink(CONFIG, Handler(), dial=hub.dial, **seams)
    result.start()
    return result


def registered(hub: MemoryHub) -> tuple[int, list[str]]:
    """The next connection's opening messages: Identify, Register, then the sessions."""
    number, first = hub.next()
    assert isinstance(first, Identify)
    kinds = [type(first).__name__]
    for _ in range(2):
        again, message = hub.next()
        assert again == number
        kinds.append(type(message).__name__)
    return number, kinds


def test_every_reconnect_registers_the_process_and_its_sessions_again():
    hub = MemoryHub()
    link(hub, retry_delays=(0.01,), stable_after=0.0)
    assert registered(hub) == (1, ["Identify", "Register", "SessionStarted"])
    hub.drop()
    assert registered(hub) == (2, ["Identify", "Register", "SessionStarted"])


def test_the_hub_asks_and_the_link_thread_answers():
    hub = MemoryHub()
    link(hub)
    registered(hub)
    hub.send(CollectStacks(request_id=7))
    assert hub.next() == (1, Stacks(request_id=7, threads=[{"id": 1}]))
    hub.send(Pause(request_id=8))
    assert hub.next() == (1, Paused(request_id=8))


def test_backoff_grows_while_the_hub_is_down_and_the_hub_gets_the_process_back():
    hub = MemoryHub()
    hub.down = True
    delays = (0.05, 0.1, 0.2)
    link(hub, retry_delays=delays)
    deadline = time.monotonic() + 5
    while len(hub.dials) < 4 and time.monotonic() < deadline:
        time.sleep(0.01)
    gaps = [later - earlier for earlier, later in zip(hub.dials, hub.dials[1:], strict=False)]
    assert len(gaps) >= 3
    for gap, delay in zip(gaps, delays, strict=False):
        assert gap >= delay * 0.9, (gaps, delays)
    hub.down = False
    assert registered(hub)[1] == ["Identify", "Register", "SessionStarted"]


def test_a_connection_that_lasted_resets_the_backoff_and_a_short_one_does_not():
    hub = MemoryHub()
    link(hub, retry_delays=(0.3,), stable_after=0.0)  # every connection counts as stable
    registered(hub)
    dropped = time.monotonic()
    hub.drop()
    registered(hub)
    assert hub.dials[-1] - dropped < 0.25  # redialled at once

    hub = MemoryHub()
    link(hub, retry_delays=(0.3,), stable_after=60.0)  # none lasts long enough
    registered(hub)
    dropped = time.monotonic()
    hub.drop()
    registered(hub)
    assert hub.dials[-1] - dropped >= 0.25  # backed off, as for a failed dial


def test_retire_hangs_up_for_good():
    """The hub's own process (the Ray hub actor's worker) retires its link: it hangs up
    and never dials again."""
    hub = MemoryHub()
    hub_link = link(hub, retry_delays=(0.01,), stable_after=0.0)
    registered(hub)
    hub_link.retire()
    hub_link._thread.join(timeout=5)  # type: ignore[union-attr]
    assert not hub_link._thread.is_alive()  # type: ignore[union-attr]
    assert len(hub.dials) == 1


class ClusterDiscovery:
    """A cluster that knows its hub (the memory hub); records each ``start`` asked for."""

    def __init__(self) -> None:
        self.starts: list[bool] = []
        self.left = False

    def in_cluster(self) -> bool:
        return True

    def left_cluster(self) -> bool:
        return self.left

    def find_hub(self, stale: object = None, start: bool = True) -> HubAddress:
        self.starts.append(start)
        return HubAddress("127.0.0.1", 9, TOKEN, None)

    def process_identity(self) -> dict[str, Any]:
        return {}


def test_after_the_hub_says_goodbye_the_link_only_looks_for_a_hub():
    """HubClosing (the hub's Ray node stops): the reconnects must not start a hub actor,
    which would land on the node that is stopping; once connected again, they may."""
    cluster = ClusterDiscovery()
    previous = discovery.installed()
    discovery.install(cluster)
    try:
        hub = MemoryHub()
        seen: list[str] = []
        handler = Handler()
        handler.on_hub_closing = seen.append  # type: ignore[method-assign]
        config = AgentConfig(hub_host=None, hub_port=0, token=TOKEN, wait_timeout=None)
        HubLink(config, handler, dial=hub.dial, retry_delays=(0.01,), stable_after=0.0).start()
        registered(hub)
        hub.send(HubClosing(reason="its Ray node is stopping"))
        hub.drop()
        registered(hub)
        assert seen == ["its Ray node is stopping"]
        assert cluster.starts == [True, False]
        hub.drop()
        registered(hub)
        assert cluster.starts == [True, False, True]  # connected since: a hub was there
    finally:
        discovery.install(previous)


def test_a_process_that_left_its_cluster_says_nothing_of_the_hub_it_took_down(
        capfd: pytest.CaptureFixture[str]) -> None:
    """A Ray driver after ray.shutdown(): its cluster's hub goes with the cluster, and the
    link's "lost the connection ... reconnecting" and "cannot ask the Ray cluster" were the
    last words of every local-Ray driver (make demo's too). It keeps trying, quietly."""
    cluster = ClusterDiscovery()
    previous = discovery.installed()
    discovery.install(cluster)
    try:
        hub = MemoryHub()
        config = AgentConfig(hub_host=None, hub_port=0, token=TOKEN, wait_timeout=None)
        HubLink(config, Handler(), dial=hub.dial, retry_delays=(0.01,),
                stable_after=0.0).start()
        registered(hub)
        cluster.left = True
        hub.drop()
        registered(hub)  # it reconnects when it can
        hub.drop()
        registered(hub)
        assert "lost the connection" not in capfd.readouterr().err
        cluster.left = False
        hub.drop()
        registered(hub)
        assert "lost the connection" in capfd.readouterr().err  # a member: it is news
    finally:
        discovery.install(previous)


def test_a_hub_whose_token_changed_is_said_once_and_the_link_comes_back_with_it(
        capfd: pytest.CaptureFixture[str]) -> None:
    """A hub started again with another token refuses the token the process linked with:
    the process says so once (not "set RAYDEBUG_TOKEN", which a running process cannot),
    keeps trying, and links again when a hub with its token is back."""
    hub = MemoryHub()
    link(hub, retry_delays=(0.01,), stable_after=0.0)
    registered(hub)
    capfd.readouterr()
    hub.token = "another-token"
    hub.drop()
    for _ in range(3):
        assert hub.refusals.get(timeout=5).startswith("wrong token")
    said = [line for line in capfd.readouterr().err.splitlines() if "refused us" in line]
    assert len(said) == 1, said
    assert "refused us: the hub's token changed since this process linked" in said[0]
    hub.token = TOKEN
    assert registered(hub)[1] == ["Identify", "Register", "SessionStarted"]


def test_a_hub_it_linked_to_that_closes_before_its_challenge_is_not_said_to_need_tls(
        capfd: pytest.CaptureFixture[str]) -> None:
    """A hub that took this process without TLS and now closes at once is stopping or
    starting: the --tls hint, right for a process that never linked, would mislead."""
    hub = MemoryHub()
    link(hub, retry_delays=(0.01,), stable_after=0.0)
    registered(hub)
    capfd.readouterr()
    hub.mute = True
    hub.drop()
    hub.refusals.get(timeout=5)
    hub.mute = False
    registered(hub)
    said = [line for line in capfd.readouterr().err.splitlines() if "challenge" in line]
    assert said and "closed the connection before its challenge: it may be stopping or " \
                    "starting" in said[0], said


def test_wait_sent_returns_once_the_posted_lines_left_and_at_once_without_a_hub():
    # What the interpreter's exit waits on: a logpoint's lines posted just before the end.
    hub = MemoryHub()
    posting = link(hub)
    registered(hub)
    lines = [LogpointOutput(text=f"log {i}", path="/job.py", line=3, task="")
             for i in range(50)]
    for line in lines:
        posting.post(line)
    assert posting.wait_sent(5.0)
    assert [hub.next()[1] for _ in lines] == lines
    unlinked = HubLink(CONFIG, Handler(), dial=hub.dial)
    unlinked.post(lines[0])
    started = time.monotonic()
    assert not unlinked.wait_sent(5.0)
    assert time.monotonic() - started < 1.0
