"""Thousands of malformed inputs on both of a live hub's listeners: the hub never crashes,
and a paused session keeps working throughout."""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from helpers import HubProcess, finish, start_hub, write_script
from raydebug.protocol import NEED_DATA, frame
from raydebug.protocol.control import ControlConnection

pytestmark = [pytest.mark.integration, pytest.mark.timeout(600)]

WORKER = """
value = 41
breakpoint()
print("finished", value + 1, flush=True)
"""

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(
        st.sampled_from(["seq", "type", "command", "event", "arguments", "request_seq",
                         "success", "role", "mac", "channel", "session", "raydebug"]),
        inner, max_size=5), max_leaves=12)

payloads = st.one_of(
    st.binary(max_size=300),
    json_values.map(lambda v: frame(json.dumps(v).encode())),
    st.tuples(st.integers(-5, 10**12), st.binary(max_size=50)).map(
        lambda t: b"Content-Length: %d\r\n\r\n" % t[0] + t[1]),
    st.lists(json_values.map(lambda v: frame(json.dumps(v).encode())), max_size=4).map(
        b"".join),
    st.sampled_from([b"GET / HTTP/1.1\r\n\r\n", b"GET /api/sessions?min=x HTTP/1.1\r\n\r\n",
                     b"HEAD /api/health HTTP/1.0\r\n\r\n", b"Content-Length: 5\r\n\r\n{}{}{",
                     b"POST /api/login HTTP/1.1\r\nHost: localhost\r\nContent-Length: 9\r\n\r\n{",
                     b"GET /dap HTTP/1.1\r\nHost: localhost\r\nUpgrade: websocket\r\n"
                     b"Connection: Upgrade\r\nSec-WebSocket-Version: 13\r\n"
                     b"Origin: http://evil.example\r\n"
                     b"Sec-WebSocket-Key: AAAAAAAAAAAAAAAAAAAAAA==\r\n\r\n",
                     b"GET /dap HTTP/1.1\r\nHost: localhost\r\nUpgrade: websocket\r\n"
                     b"Connection: Upgrade\r\nSec-WebSocket-Version: 8\r\n\r\n"]),
)

UPGRADE = (b"GET /dap HTTP/1.1\r\nHost: localhost\r\nUpgrade: websocket\r\n"
           b"Connection: Upgrade\r\nSec-WebSocket-Version: 13\r\n"
           b"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n")


def ws_frame(first: int, masked: bool, length_form: int, payload: bytes) -> bytes:
    """A WebSocket frame with any first byte (FIN, RSV, opcode), any length encoding."""
    length = len(payload)
    if length_form == 0 and length < 126:
        head = bytes([first, (0x80 if masked else 0) | length])
    elif length_form == 1:
        head = bytes([first, (0x80 if masked else 0) | 126]) + length.to_bytes(2, "big")
    else:
        head = bytes([first, (0x80 if masked else 0) | 127]) + length.to_bytes(8, "big")
    if masked:
        key = b"\x01\x02\x03\x04"
        payload = bytes(byte ^ key[index % 4] for index, byte in enumerate(payload))
        head += key
    return head + payload


ws_payloads = st.one_of(
    st.binary(max_size=300),
    st.lists(st.tuples(st.sampled_from([0x81, 0x82, 0x88, 0x89, 0x8A, 0x01, 0x80, 0x00,
                                        0xC1, 0x83, 0x8F]),
                       st.booleans(), st.integers(0, 2),
                       st.one_of(st.binary(max_size=200),
                                 json_values.map(lambda v: json.dumps(v).encode()))).map(
        lambda t: ws_frame(*t)), max_size=4).map(b"".join),
    st.integers(0, 2**63).map(lambda n: b"\x81\xff" + n.to_bytes(8, "big") + b"\x00" * 4),
)


@pytest.fixture(scope="module")
def quiet_hub() -> Iterator[HubProcess]:
    hub = start_hub("--log-level", "error")  # every refusal would log a line otherwise
    try:
        yield hub
    finally:
        hub.close()


def send(address: tuple[str, int], payload: bytes, answer_challenge: bool = False) -> None:
    """Send ``payload``, close our side, read until the hub closes (bounded)."""
    with socket.create_connection(address, timeout=15) as sock:
        if answer_challenge:  # get past the agent port's greeting first
            stream = ControlConnection()
            while stream.next_event() is NEED_DATA:
                data = sock.recv(65536)
                if not data:
                    return
                stream.receive_data(data)
        try:
            sock.sendall(payload)
            sock.shutdown(socket.SHUT_WR)
            while sock.recv(65536):
                pass
        except OSError:
            pass  # the hub may close first: that is a fine answer to garbage


@settings(max_examples=1500, deadline=None, suppress_health_check=list(HealthCheck))
@given(payload=payloads)
def test_client_port_fuzz(quiet_hub: HubProcess, payload: bytes):
    send(quiet_hub.client, payload)


@settings(max_examples=500, deadline=None, suppress_health_check=list(HealthCheck))
@given(payload=ws_payloads)
def test_dap_websocket_fuzz(quiet_hub: HubProcess, payload: bytes):
    send(quiet_hub.client, UPGRADE + payload)


@settings(max_examples=1500, deadline=None, suppress_health_check=list(HealthCheck))
@given(payload=payloads, after_challenge=st.booleans())
def test_agent_port_fuzz(quiet_hub: HubProcess, payload: bytes, after_challenge: bool):
    send(quiet_hub.worker, payload, answer_challenge=after_challenge)


def test_the_hub_survived_and_still_debugs(quiet_hub: HubProcess, tmp_path: Path):
    assert quiet_hub.get("/api/health")["status"] == "ok"
    proc = quiet_hub.spawn(write_script(tmp_path, "worker.py", WORKER))
    [session] = quiet_hub.wait_sessions(1)
    assert quiet_hub.evaluate_and_detach(session["id"], "value") == "41"
    assert finish(proc)[0] == 0
    assert quiet_hub.proc.poll() is None  # never crashed
    quiet_hub.proc.terminate()
    _, errors = quiet_hub.proc.communicate(timeout=30)
    assert "Traceback" not in errors and "unexpected error" not in errors, errors[-3000:]
