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
from raydebug.protocol.control import ControlStream

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
                     b"HEAD /api/health HTTP/1.0\r\n\r\n", b"Content-Length: 5\r\n\r\n{}{}{"]),
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
        if answer_challenge:  # get past the worker port's greeting first
            stream = ControlStream()
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


@settings(max_examples=1500, deadline=None, suppress_health_check=list(HealthCheck))
@given(payload=payloads, after_challenge=st.booleans())
def test_worker_port_fuzz(quiet_hub: HubProcess, payload: bytes, after_challenge: bool):
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
