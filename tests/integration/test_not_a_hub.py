"""``raydebug list --hub H`` where H is no raydebug hub's client port says so in one line
(it said only ``HTTP 404``): a real plain HTTP server, and a port that does not speak
HTTP."""

from __future__ import annotations

import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import HTTPServer, SimpleHTTPRequestHandler
from pathlib import Path

import pytest

from helpers import TIMEOUT

pytestmark = pytest.mark.integration


class QuietHandler(SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture
def plain_http_server(tmp_path: Path) -> Iterator[str]:
    """A real HTTP server (Python's, serving an empty directory) on a free loopback port."""
    server = HTTPServer(("127.0.0.1", 0),
                        lambda *a: QuietHandler(*a, directory=str(tmp_path)))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield "{}:{}".format(*server.server_address)
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)


@pytest.fixture
def not_http() -> Iterator[str]:
    """A port that greets with bytes of its own and closes, as a hub's agent port does."""
    listener = socket.create_server(("127.0.0.1", 0))

    def greet() -> None:
        connection, _ = listener.accept()
        with connection:
            connection.sendall(b"\x00\x00\x00\x10{\"type\": \"chal\"}")
            connection.recv(65536)

    thread = threading.Thread(target=greet, daemon=True)
    thread.start()
    try:
        yield "{}:{}".format(*listener.getsockname())
    finally:
        listener.close()
        thread.join(timeout=10)


def list_at(address: str) -> tuple[int, str]:
    """``raydebug list --hub ADDRESS`` as a user runs it: its exit status and stderr."""
    result = subprocess.run([sys.executable, "-m", "raydebug", "list", "--hub", address],
                            capture_output=True, text=True, timeout=TIMEOUT)
    return result.returncode, result.stderr


def test_a_plain_http_server_is_said_not_to_be_a_hub(plain_http_server: str):
    assert list_at(plain_http_server) == (1, (
        f"raydebug: {plain_http_server} is not a raydebug hub: it answered /api/sessions "
        "with HTTP 404; give the hub's client port (`raydebug hub-address` on its machine "
        "prints it)\n"))


def test_a_port_that_does_not_answer_http_is_said_not_to_be_a_client_port(not_http: str):
    assert list_at(not_http) == (1, (
        f"raydebug: {not_http} is not a raydebug hub's client port: it does not answer HTTP "
        "(a hub's agent port?); give the hub's client port (`raydebug hub-address` on its "
        "machine prints it)\n"))


def test_a_hub_that_does_not_answer_is_said_to_be_there_and_silent(tmp_path: Path):
    """Found by use: a hub whose process was stopped (``kill -STOP``) was "no hub at ...
    (timed out)": the kernel takes the connection, nothing answers. A listening socket
    that never accepts is the same to a client."""
    from raydebug.client.hub_api import request_json
    from raydebug.errors import HubUnreachableError

    with socket.create_server(("127.0.0.1", 0)) as silent:
        address = "{}:{}".format(*silent.getsockname())
        with pytest.raises(HubUnreachableError) as raised:
            request_json(address, "/api/sessions", timeout=0.5)
    assert str(raised.value) == (f"the hub at {address} did not answer within 0.5 s (its "
                                 "process may be stopped, or too busy to answer)")
