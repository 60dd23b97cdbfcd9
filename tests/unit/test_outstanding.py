"""The relay's record of unanswered requests, and its byte scan of pydevd's responses."""

from __future__ import annotations

import json

from raydebug.protocol import Request
from raydebug.protocol.outstanding import OutstandingRequests, response_to


def body(message: dict[str, object]) -> bytes:
    return json.dumps(message).encode()


def test_response_to_reads_request_seq_without_parsing():
    assert response_to(body({"seq": 9, "type": "response", "request_seq": 42,
                             "command": "threads", "success": True})) == 42
    assert response_to(b'{"request_seq":7,"type":"response"}') == 7
    assert response_to(body({"seq": 3, "type": "event", "event": "stopped"})) is None


def test_a_string_value_cannot_fake_a_response():
    # A variable whose value looks like a response: its quotes are escaped in the JSON.
    fake = body({"seq": 5, "type": "event", "event": "output",
                 "body": {"output": '{"request_seq": 1}'}})
    assert response_to(fake) is None


def test_outstanding_requests_are_crossed_off_by_their_response():
    outstanding = OutstandingRequests()
    outstanding.forwarded(Request(seq=1, command="evaluate"))
    outstanding.forwarded(Request(seq=2, command="disconnect"))
    outstanding.answered(body({"type": "response", "request_seq": 1, "seq": 8}))
    outstanding.answered(body({"type": "event", "event": "output", "seq": 9}))
    assert [r.command for r in outstanding.take_all()] == ["disconnect"]
    assert len(outstanding) == 0 and outstanding.take_all() == []
