"""Bad input on every listener gets an error and a closed connection; nothing else breaks."""

from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path

import pytest

from helpers import HubProcess, finish, write_script
from raydebug.protocol import NEED_DATA, frame
from raydebug.protocol.control import (
    Challenge,
    ControlConnection,
    Refused,
    SessionStarted,
    Welcome,
    encode_control,
)
from raydebug.protocol.handshake import AgentHandshake

pytestmark = pytest.mark.integration

WORKER = """
value = 41
breakpoint()
print("finished", value + 1, flush=True)
"""


def exchange(address: tuple[str, int], payload: bytes, timeout: float = 10.0) -> bytes:
    """Send ``payload``, then read until the hub closes the connection."""
    with socket.create_connection(address, timeout=timeout) as sock:
        sock.sendall(payload)
        received = b""
        while chunk := sock.recv(65536):
            received += chunk
    return received


CLIENT_GARBAGE = {
    "binary noise": b"\x00\xff\x13\x37" * 64,
    "wrong header": b"Content-Type: text/plain\r\n\r\n{}",
    "huge length": b"Content-Length: 2000000000\r\n\r\n{",
    "invalid json": frame(b"{not json"),
    "json but not dap": frame(b"[1, 2, 3]"),
    "endless header": b"Content-Length: 1" + b"1" * 10_000,
}


@pytest.mark.parametrize("name", sorted(CLIENT_GARBAGE))
def test_client_port_refuses_garbage_and_keeps_serving(hub: HubProcess, tmp_path: Path,
                                                       name: str):
    proc = hub.spawn(write_script(tmp_path, "worker.py", WORKER))
    [session] = hub.wait_sessions(1)
    answer = exchange(hub.client, CLIENT_GARBAGE[name])
    if CLIENT_GARBAGE[name].startswith(b"Content-Length"):
        assert b"raydebug hub:" in answer  # a DAP output event saying what was wrong
    assert hub.get("/api/health")["status"] == "ok"
    hub.attach_and_detach(session["id"])  # still debuggable
    code, out, _ = finish(proc)
    assert code == 0 and "finished 42" in out


def test_http_errors_are_json(hub: HubProcess):
    answer = exchange(hub.client, b"GET /nope HTTP/1.1\r\nHost: localhost\r\n\r\n")
    assert answer.startswith(b"HTTP/1.1 404")
    assert b'"/api/sessions"' in answer
    answer = exchange(hub.client, b"POST /api/sessions HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
    assert answer.startswith(b"HTTP/1.1 405")
    answer = exchange(hub.client, b"GET /api/sessions?min=x&timeout=1 HTTP/1.0\r\n\r\n")
    assert answer.startswith(b"HTTP/1.1 400")


def handshake(hub: HubProcess, token: str, replay: bytes | None = None) -> tuple[object, bytes]:
    """The agent's side of the handshake with ``token``, or with a recorded ``replay`` of an
    earlier hello; return the hub's answer (a Welcome whose proof was checked, or a Refused)
    and the hello sent."""
    with socket.create_connection(hub.worker, timeout=10) as sock:
        shake, stream = AgentHandshake(token, "control"), ControlConnection()
        while (challenge := shake.next_event()) is NEED_DATA:
            shake.receive_data(sock.recv(65536))
        assert isinstance(challenge, Challenge)
        hello = shake.send() if replay is None else replay
        sock.sendall(hello)
        reader = shake if replay is None else stream  # a replay's answer is read as is
        while (reply := reader.next_event()) is NEED_DATA:
            reader.receive_data(sock.recv(65536))
    return reply, hello


def test_agent_port_refuses_wrong_tokens_and_replays(hub: HubProcess):
    refused, _ = handshake(hub, "wrong")
    assert isinstance(refused, Refused) and "wrong token" in refused.reason

    # A handshake recorded on one connection is useless on the next: the nonce is fresh.
    welcome, recorded = handshake(hub, hub.token)
    assert isinstance(welcome, Welcome)  # and the hub proved it knows the token
    replayed, _ = handshake(hub, hub.token, replay=recorded)
    assert isinstance(replayed, Refused) and "wrong token" in replayed.reason

    for garbage in (b"\x00" * 100, b"Content-Length: 99999999999\r\n\r\n",
                    frame(b'{"type": "hello"}'), frame(b"nonsense")):
        exchange(hub.worker, garbage)
    health = hub.get("/api/health")
    assert health["status"] == "ok" and health["refused_agents"] == 2


def test_a_control_connection_says_who_it_is_first(hub: HubProcess):
    with socket.create_connection(hub.worker, timeout=10) as sock:
        shake = AgentHandshake(hub.token, "control")
        while shake.next_event() is NEED_DATA:
            shake.receive_data(sock.recv(65536))
        sock.sendall(shake.send())
        while (welcome := shake.next_event()) is NEED_DATA:
            shake.receive_data(sock.recv(65536))
        assert isinstance(welcome, Welcome)
        sock.sendall(encode_control(SessionStarted(session={"id": "abc"})))  # no Identify
        while sock.recv(65536):
            pass  # until the hub closes
    assert hub.get("/api/health")["registered_total"] == 0
    assert "expected an identify message first" in hub.stop_and_read_log()


def test_worker_with_wrong_token_says_so_and_continues(hub: HubProcess, tmp_path: Path):
    proc = hub.spawn(write_script(tmp_path, "worker.py", WORKER),
                     RAYDEBUG_TOKEN="not-the-token", RAYDEBUG_WAIT_TIMEOUT="2")
    code, out, err = finish(proc)
    assert code == 0 and "finished 42" in out
    assert "refused us: wrong token" in err
    assert "continuing" in err
    assert "Traceback" not in err


def test_no_hub_at_the_address_is_reported_then_the_process_continues(tmp_path: Path):
    with socket.socket() as placeholder:  # a port with certainly nothing listening
        placeholder.bind(("127.0.0.1", 0))
        port = placeholder.getsockname()[1]
    script = write_script(tmp_path, "worker.py", WORKER)
    env = {"PATH": "/usr/bin:/bin", "PYTHONBREAKPOINT": "raydebug.set_trace",
           "RAYDEBUG_HUB": f"127.0.0.1:{port}", "RAYDEBUG_TOKEN": "t",
           "RAYDEBUG_WAIT_TIMEOUT": "1.5"}
    result = subprocess.run([sys.executable, str(script)], env=env, capture_output=True,
                            text=True, timeout=30)
    assert result.returncode == 0 and "finished 42" in result.stdout
    assert f"cannot reach the hub at 127.0.0.1:{port}" in result.stderr
    assert "RAYDEBUG_WAIT_TIMEOUT" in result.stderr
    assert "Traceback" not in result.stderr


def test_missing_configuration_is_one_line_not_a_traceback(tmp_path: Path):
    script = write_script(tmp_path, "worker.py", WORKER)
    env = {"PATH": "/usr/bin:/bin", "PYTHONBREAKPOINT": "raydebug.set_trace",
           "XDG_STATE_HOME": str(tmp_path / "no-hub-here")}
    result = subprocess.run([sys.executable, str(script)], env=env, capture_output=True,
                            text=True, timeout=30)
    assert result.returncode == 0 and "finished 42" in result.stdout
    assert result.stderr.count("\n") == 1
    assert "RAYDEBUG_HUB is not set and no hub runs on this machine" in result.stderr


def test_list_without_a_hub_is_one_red_line():
    with socket.socket() as placeholder:
        placeholder.bind(("127.0.0.1", 0))
        port = placeholder.getsockname()[1]
    result = subprocess.run(
        [sys.executable, "-m", "raydebug", "list", "--hub", f"127.0.0.1:{port}"],
        capture_output=True, text=True, timeout=30)
    assert result.returncode == 1
    assert f"no hub at 127.0.0.1:{port}" in result.stderr
    assert "Traceback" not in result.stderr
