"""The snapshot format: JSON dicts both ways, old and new writers read, bad input named."""

from __future__ import annotations

import json

import pytest

from raydebug.errors import SnapshotFormatError
from raydebug.snapshots.format import ExceptionInfo, FrameCapture, Snapshot, Value


def sample() -> Snapshot:
    config = Value("config", "dict", "{'layers': [1, 2]}", children=[
        Value("['layers']", "list", "[1, 2]", children=[
            Value("[0]", "int", "1"), Value("[1]", "int", "2")])])
    return Snapshot(
        id="x0123456789", reason="exception", time=1_700_000_000.5,
        process={"pid": 42, "host": "h", "labels": {"rank": "0"}, "task_name": "f"},
        thread_name="MainThread",
        exception=ExceptionInfo("ValueError", "bad", "Traceback...\nValueError: bad\n"),
        frames=[FrameCapture("f", "/job.py", 3, "def f():\n    raise\n",
                             [config, Value("big", "list", "[...]", children=[],
                                            truncated=True)]),
                FrameCapture("<module>", "/job.py", 9, None, [])])


def test_a_snapshot_survives_json_both_ways():
    snapshot = sample()
    text = json.dumps(snapshot.to_json())
    assert Snapshot.from_json(json.loads(text)) == snapshot


def test_a_leaf_and_an_empty_container_stay_apart():
    leaf, empty = Value("a", "int", "1"), Value("b", "list", "[]", children=[])
    assert Value.from_json(leaf.to_json()).children is None
    assert Value.from_json(empty.to_json()).children == []


def test_unknown_keys_of_a_newer_writer_are_ignored():
    data = sample().to_json()
    data["new_field"] = 1
    data["frames"][0]["locals"][0]["extra"] = True
    assert Snapshot.from_json(data) == sample()


@pytest.mark.parametrize("change, named", [
    (lambda d: d.pop("id"), "snapshot.id"),
    (lambda d: d.update(reason="paused"), "snapshot.reason"),
    (lambda d: d.update(time="now"), "snapshot.time"),
    (lambda d: d.update(format=99), "snapshot.format"),
    (lambda d: d["frames"][0].update(line="3"), "frame.line"),
    (lambda d: d["frames"][0]["locals"][0].pop("repr"), "value.repr"),
    (lambda d: d.update(frames={}), "snapshot.frames"),
])
def test_a_bad_field_is_named(change, named):
    data = sample().to_json()
    change(data)
    with pytest.raises(SnapshotFormatError, match=named):
        Snapshot.from_json(data)
