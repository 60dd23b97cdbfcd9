"""DAP messages and the link's control messages, parsed and encoded without I/O."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from raydebug.errors import RemoteProtocolError
from raydebug.protocol import DapConnection, Event, Request, Response, frame, parse_message
from raydebug.protocol.control import (
    ControlConnection,
    SessionStarted,
    decode_control,
    encode_control,
)


class ConnectionPair:
    """Two DapConnections wired back to back, as in h11's tests."""

    def __init__(self) -> None:
        self.client = DapConnection()
        self.server = DapConnection()

    def client_sends(self, message: Request) -> object:
        self.server.receive_data(self.client.send(message))
        return self.server.next_event()


def test_a_request_round_trips_and_keeps_its_bytes():
    pair = ConnectionPair()
    received = pair.client_sends(Request(seq=7, command="stackTrace", arguments={"threadId": 1}))
    assert received == Request(seq=7, command="stackTrace", arguments={"threadId": 1})
    assert isinstance(received, Request) and received.raw is not None
    forwarded = pair.server.send(received)  # a proxy forwards the very same bytes
    assert forwarded == frame(received.raw)


def test_renumbering_gives_hub_messages_their_own_sequence():
    connection = DapConnection()
    first = connection.send(Event(seq=99, event="output"), renumber=True)
    second = connection.send(Event(seq=99, event="output"), renumber=True)
    assert b'"seq":1' in first and b'"seq":2' in second


def test_responses_and_events_parse():
    response = parse_message(json.dumps({"seq": 3, "type": "response", "request_seq": 2,
                                         "command": "threads", "success": True,
                                         "body": {"threads": []}}).encode())
    assert response == Response(seq=3, request_seq=2, command="threads", body={"threads": []})
    event = parse_message(b'{"seq": 4, "type": "event", "event": "stopped", '
                          b'"body": {"threadId": 1}}')
    assert event == Event(seq=4, event="stopped", body={"threadId": 1})


@pytest.mark.parametrize("body, error", [
    (b"{nope", "not valid JSON"),
    (b"[]", "not a JSON object"),
    (b'{"type": "request", "seq": "1", "command": "x"}', "'seq' must be a int"),
    (b'{"type": "request", "seq": true, "command": "x"}', "'seq' must be a int"),
    (b'{"type": "teapot", "seq": 1}', "unknown message type"),
    (b'{"type": "request", "seq": 1, "command": "x", "arguments": 5}', "must be an object"),
    (b"\xff\xfe", "not valid JSON"),
])
def test_invalid_messages_are_remote_errors(body: bytes, error: str):
    with pytest.raises(RemoteProtocolError, match=error):
        parse_message(body)


@settings(max_examples=2000, deadline=None)
@given(st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=5),
                    lambda inner: st.lists(inner, max_size=3)
                    | st.dictionaries(st.sampled_from(["seq", "type", "command", "event",
                                                       "request_seq", "success", "body"]),
                                      inner, max_size=5)))
def test_fuzz_json_values_parse_or_raise_remote_errors(value: object):
    try:
        parse_message(json.dumps(value).encode())
    except RemoteProtocolError:
        pass


def test_worker_messages_round_trip_and_validate():
    stream = ControlConnection()
    stream.receive_data(encode_control(SessionStarted(session={"id": "abc"})))
    assert stream.next_event() == SessionStarted(session={"id": "abc"})
    with pytest.raises(RemoteProtocolError, match="unknown control message type"):
        decode_control(b'{"type": "launch_missiles"}')
    with pytest.raises(RemoteProtocolError, match="unknown control message type"):
        decode_control(b'{"type": ["not", "hashable"]}')  # found by fuzzing a live hub
    with pytest.raises(RemoteProtocolError, match=r"hello\.mac must be a str"):
        decode_control(b'{"type": "hello", "role": "data", "mac": 5}')
    with pytest.raises(RemoteProtocolError, match="incomplete hello"):
        decode_control(b'{"type": "hello", "role": "data"}')




def test_hub_closing_round_trips():
    from raydebug.protocol.control import HubClosing

    stream = ControlConnection()
    stream.receive_data(encode_control(HubClosing(reason="its Ray node is stopping")))
    assert stream.next_event() == HubClosing(reason="its Ray node is stopping")
    assert decode_control(b'{"type": "hub_closing"}') == HubClosing()


def test_control_messages_are_frozen_dataclasses_from_their_import_on():
    """Each message type is what its class says as soon as ``control`` is imported, before
    any instance (in a fresh interpreter: this one has made every type by now)."""
    code = """
import dataclasses, json
from raydebug.protocol import control
print(json.dumps({name: [vars(kind)["__dataclass_params__"].frozen,
                         [spec.name for spec in dataclasses.fields(kind)]]
                  for name, kind in vars(control).items()
                  if isinstance(kind, type) and issubclass(kind, control.ControlMessage)
                  and "__dataclass_params__" in vars(kind)}))
"""
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True, timeout=60)
    found = json.loads(done.stdout)
    assert len(found) == 27 and all(frozen for frozen, _ in found.values()), found
    assert found["ControlMessage"] == [True, []]
    assert found["Challenge"] == [True, ["nonce", "version"]]
    assert found["Hello"] == [True, ["role", "mac", "version", "nonce", "channel"]]
    assert found["Stacks"] == [True, ["request_id", "threads", "now"]]
