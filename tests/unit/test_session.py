"""The session state table and record validation."""

from __future__ import annotations

import pytest

from raydebug.errors import LocalProtocolError, RemoteProtocolError
from raydebug.session import PausedThread, SessionEvent, SessionState, next_state

W, A, G = SessionState.WAITING, SessionState.ATTACHED, SessionState.GONE


@pytest.mark.parametrize("state, event, after", [
    (W, SessionEvent.CLIENT_ATTACHED, A),
    (A, SessionEvent.CLIENT_DETACHED, W),
    (W, SessionEvent.ENDED, G),
    (A, SessionEvent.ENDED, G),
])
def test_legal_transitions(state: SessionState, event: SessionEvent, after: SessionState):
    assert next_state(state, event) is after


@pytest.mark.parametrize("state, event", [
    (A, SessionEvent.CLIENT_ATTACHED),
    (W, SessionEvent.CLIENT_DETACHED),
    (G, SessionEvent.CLIENT_ATTACHED),
])
def test_illegal_transitions_are_local_errors(state: SessionState, event: SessionEvent):
    with pytest.raises(LocalProtocolError):
        next_state(state, event)


def record_dict(**changes: object) -> dict[str, object]:
    base = PausedThread(id="s1", pid=1, host="h", file="f.py", line=3, function="g",
                         since=1000.0).to_dict()
    base.update(changes)
    return base


def test_records_round_trip_and_ignore_unknown_fields():
    data = record_dict(future_field="x")
    record = PausedThread.from_dict(data)
    assert record.to_dict() == record_dict()


@pytest.mark.parametrize("changes, error", [
    ({"pid": "1"}, "pid"),
    ({"reason": "boredom"}, "reason"),
    ({"id": ""}, "id"),
    ({"id": "x" * 65}, "id"),
    ({"labels": []}, "labels"),
])
def test_invalid_records_are_remote_errors(changes: dict[str, object], error: str):
    with pytest.raises(RemoteProtocolError, match=error):
        PausedThread.from_dict(record_dict(**changes))


def test_incomplete_records_are_remote_errors():
    data = record_dict()
    del data["pid"]
    with pytest.raises(RemoteProtocolError, match="incomplete"):
        PausedThread.from_dict(data)
