"""The live-process messages of the control connection, and the process lifecycle table."""

from __future__ import annotations

import pytest

from raydebug.errors import LocalProtocolError, RemoteProtocolError
from raydebug.protocol import frame
from raydebug.protocol.control import (
    PROTOCOL_VERSION,
    CollectStacks,
    ControlConnection,
    Pause,
    Paused,
    Register,
    Stacks,
    encode_control,
)
from raydebug.session import (
    REASON_PAUSE,
    PausedThread,
    ProcessEvent,
    ProcessState,
    next_process_state,
)


@pytest.mark.parametrize("message", [
    Register(process={"pid": 7, "labels": {"RANK": "1"}, "parent_pid": 3}),
    CollectStacks(request_id=4, locals=True),
    Stacks(request_id=4, threads=[{"id": 1, "name": "MainThread", "frames": []}],
           now={"task_name": "f"}),
    Pause(request_id=9),
    Paused(request_id=9, error="pydevd could not start"),
])
def test_live_messages_round_trip(message):
    stream = ControlConnection()
    stream.receive_data(encode_control(message))
    assert stream.next_event() == message


def test_the_live_messages_are_a_new_protocol_version():
    # 3: a version-2 agent knows none of them; 4: a version-3 hub knows no pause_pending;
    # 5: a version-4 peer knows no open_data_connection; 6: a version-5 agent knows no
    # resume (raydebug continue); 7: a version-6 hub knows no snapshot_taken. Each refused
    # at hello.
    assert PROTOCOL_VERSION == 7


@pytest.mark.parametrize("body, complaint", [
    (b'{"type": "collect_stacks"}', "incomplete collect_stacks"),
    (b'{"type": "collect_stacks", "request_id": 1, "locals": 1}', "locals must be a bool"),
    (b'{"type": "stacks", "request_id": 1, "threads": {}}', "threads must be a list"),
    (b'{"type": "pause", "request_id": true}', "request_id must be a int"),
    (b'{"type": "register", "process": []}', "process must be a dict"),
])
def test_malformed_live_messages_are_the_peers_fault(body, complaint):
    stream = ControlConnection()
    stream.receive_data(frame(body))
    with pytest.raises(RemoteProtocolError, match=complaint):
        stream.next_event()


def test_a_pause_session_is_a_valid_record():
    record = PausedThread.from_dict({"id": "a1", "pid": 1, "host": "h", "file": "f.py",
                                     "line": 3, "function": "main", "reason": REASON_PAUSE})
    assert record.reason == "pause"


def test_process_lifecycle():
    state = ProcessState.RUNNING
    state = next_process_state(state, ProcessEvent.SESSION_STARTED)
    assert state is ProcessState.PAUSED
    assert next_process_state(state, ProcessEvent.SESSION_STARTED) is ProcessState.PAUSED
    state = next_process_state(state, ProcessEvent.LAST_SESSION_ENDED)
    assert state is ProcessState.RUNNING
    assert next_process_state(state, ProcessEvent.LOST) is ProcessState.GONE
    with pytest.raises(LocalProtocolError, match="a gone process cannot be session started"):
        next_process_state(ProcessState.GONE, ProcessEvent.SESSION_STARTED)
    with pytest.raises(LocalProtocolError):
        next_process_state(ProcessState.RUNNING, ProcessEvent.LAST_SESSION_ENDED)
