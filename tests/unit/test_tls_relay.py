"""The agent's TLS relay over real sockets: a TLS "hub" on loopback with the hub's certificate,
and the plain socket the agent would give pydevd."""

from __future__ import annotations

import os
import socket
import ssl
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import pytest

from raydebug import tls
from raydebug.agent.link.relay import FLUSH_TIMEOUT, start_relay

TIMEOUT = 30.0
CLOSE_TIMEOUT = 3.0  # shorter than FLUSH_TIMEOUT: a close must not wait out the flush limit
assert CLOSE_TIMEOUT < FLUSH_TIMEOUT


@dataclass
class Relayed:
    hub: ssl.SSLSocket  # the hub's end of the TLS data connection
    pydevd: socket.socket  # what the agent hands to pydevd
    relay: threading.Thread


@pytest.fixture(scope="module")
def certificate(tmp_path_factory: pytest.TempPathFactory) -> tls.Certificate:
    return tls.load_or_create(tmp_path_factory.mktemp("cert"))


@pytest.fixture
def relayed(certificate: tls.Certificate) -> Iterator[Relayed]:
    context = certificate.server_context()
    context.num_tickets = 2  # post-handshake messages, which the relay must pass over too
    accepted: list[ssl.SSLSocket] = []

    def accept(listener: socket.socket) -> None:
        conn, _ = listener.accept()
        conn.settimeout(TIMEOUT)
        # No ragged EOFs: a relay that dropped TLS without close_notify fails the tests.
        accepted.append(context.wrap_socket(conn, server_side=True,
                                            suppress_ragged_eofs=False))

    with socket.create_server(("127.0.0.1", 0)) as listener:
        hub_thread = threading.Thread(target=accept, args=(listener,))
        hub_thread.start()
        sock = socket.create_connection(listener.getsockname(), timeout=TIMEOUT)
        agent_side = tls.wrap_pinned(sock, certificate.fingerprint, "loopback")
        hub_thread.join(TIMEOUT)
    agent_side.settimeout(None)  # as the link hands it over
    pydevd, relay = start_relay(agent_side)
    pydevd.settimeout(TIMEOUT)
    [hub] = accepted
    try:
        yield Relayed(hub, pydevd, relay)
    finally:
        hub.close()
        pydevd.close()
        relay.join(TIMEOUT)
    assert not relay.is_alive()


class Background:
    """``target(*args)`` on a thread; :meth:`join` waits for it and raises what it raised."""

    def __init__(self, target: Callable[..., object], *args: object) -> None:
        self._error: BaseException | None = None

        def run() -> None:
            try:
                target(*args)
            except BaseException as error:
                self._error = error

        self._thread = threading.Thread(target=run)
        self._thread.start()

    def join(self, timeout: float = TIMEOUT) -> None:
        self._thread.join(timeout)
        assert not self._thread.is_alive()
        if self._error is not None:
            raise self._error


def recv_exactly(sock: socket.socket, size: int) -> bytes:
    data = bytearray()
    while len(data) < size:
        chunk = sock.recv(min(size - len(data), 1 << 20))
        assert chunk, f"EOF after {len(data)} of {size} bytes"
        data += chunk
    return bytes(data)


def recv_to_eof(sock: socket.socket) -> bytes:
    data = bytearray()
    while chunk := sock.recv(65536):
        data += chunk
    return bytes(data)


def test_bytes_flow_both_ways_and_megabytes_arrive_intact(relayed: Relayed):
    assert relayed.relay.pydev_do_not_trace  # type: ignore[attr-defined]
    relayed.hub.sendall(b"hello pydevd")
    assert recv_exactly(relayed.pydevd, 12) == b"hello pydevd"
    relayed.pydevd.sendall(b"hello hub")
    assert recv_exactly(relayed.hub, 9) == b"hello hub"

    # Both directions at once: the hub echoes on one thread (one thread per SSL object)
    # while pydevd's side writes on one thread and reads on another, as pydevd does.
    payload = os.urandom(8 * 1024 * 1024)

    def echo() -> None:
        remaining = len(payload)
        while remaining:
            data = relayed.hub.recv(65536)
            assert data
            relayed.hub.sendall(data)
            remaining -= len(data)

    threads = [Background(echo), Background(relayed.pydevd.sendall, payload)]
    assert recv_exactly(relayed.pydevd, len(payload)) == payload
    for thread in threads:
        thread.join()


def test_pydevd_closing_its_socket_closes_the_tls_connection_cleanly(relayed: Relayed):
    relayed.hub.settimeout(CLOSE_TIMEOUT)
    relayed.pydevd.settimeout(CLOSE_TIMEOUT)
    relayed.pydevd.sendall(b"last words" * 100_000)
    relayed.pydevd.shutdown(socket.SHUT_WR)  # what pydevd's writer does when it is killed
    # Everything pydevd sent, then a close_notify (a ragged EOF would raise SSLEOFError).
    assert recv_to_eof(relayed.hub) == b"last words" * 100_000
    assert relayed.pydevd.recv(1) == b""  # and pydevd's reader sees the end too
    relayed.relay.join(CLOSE_TIMEOUT)
    assert not relayed.relay.is_alive()


@pytest.mark.parametrize("clean", [True, False], ids=["close_notify", "abrupt"])
def test_the_hub_closing_the_connection_gives_pydevd_eof(relayed: Relayed, clean: bool):
    relayed.pydevd.settimeout(CLOSE_TIMEOUT)
    relayed.hub.settimeout(CLOSE_TIMEOUT)
    relayed.hub.sendall(b"goodbye" * 100_000)
    # unwrap() sends a close_notify, then waits for the relay's, which comes only once
    # pydevd has read everything: so it runs on its own thread.
    closing = Background(relayed.hub.unwrap if clean else relayed.hub.close)
    assert recv_to_eof(relayed.pydevd) == b"goodbye" * 100_000
    closing.join(CLOSE_TIMEOUT)
    relayed.relay.join(CLOSE_TIMEOUT)
    assert not relayed.relay.is_alive()


def test_without_tls_there_is_no_relay():
    from raydebug.agent.link.data_connection import is_tls

    plain, other = socket.socketpair()
    with plain, other:
        assert not is_tls(plain)
