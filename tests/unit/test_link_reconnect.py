"""The agent's hub link reconnecting, in memory: a dialer seam hands it socketpairs whose
other end is a hub's handshake on a thread (agent/hub_link.py). The real thing (a hub
process killed and restarted) is in tests/integration/test_live_processes.py."""

from __future__ import annotations

import queue
import socket
import threading
import time
from typing import Any

from raydebug.agent.config import AgentConfig
from raydebug.agent.hub_link import HubLink
from raydebug.protocol import NEED_DATA
from raydebug.protocol.control import (
    CollectStacks,
    ControlMessage,
    ControlStream,
    Identify,
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
    queues what the agent sends. ``down``: dials are refused."""

    def __init__(self) -> None:
        self.down = False
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
        shake = HubHandshake(TOKEN)
        sock.sendall(shake.send())
        while shake.next_event() is NEED_DATA:
            shake.receive_data(sock.recv(65536))
        sock.sendall(shake.send())
        stream = ControlStream()
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
                self.received.put((number, message))
        except OSError:
            return

    def send(self, message: ControlMessage) -> None:
        self.sockets[-1].sendall(encode_control(message))

    def drop(self) -> None:
        self.sockets[-1].shutdown(socket.SHUT_RDWR)
        self.sockets[-1].close()

    def next(self, timeout: float = 5.0) -> tuple[int, ControlMessage]:
        return self.received.get(timeout=timeout)


class Handler:
    """The agent's side, as the link sees it."""

    def registration(self) -> Register:
        return Register(process={"pid": 4242, "labels": {"RANK": "1"}})

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
