"""Capturing a traceback's or a frame's locals: bounded in depth, width, size and rate."""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass

from raydebug.snapshots.capture import CUT_NAME, capture_exception, capture_frames, capture_point
from raydebug.snapshots.format import Snapshot, Value
from raydebug.snapshots.limits import RateLimit, SnapshotLimits


@dataclass
class Model:
    name: str
    layers: list


def fails(config, model):
    rows = list(range(3))  # noqa: F841  (a local the snapshot shows)
    raise ValueError(f"bad config {config['lr']}")


def caller():
    config = {"lr": 0.1, "layers": [{"units": 8, "act": {"name": "relu"}}]}
    fails(config, Model("m", [1, 2]))


def child(value: Value, name: str) -> Value:
    assert value.children is not None, f"{value.name} has no children"
    return next(found for found in value.children if found.name == name)


def local(snapshot: Snapshot, frame: int, name: str) -> Value:
    return next(value for value in snapshot.frames[frame].locals if value.name == name)


def raised() -> BaseException:
    try:
        caller()
    except ValueError as error:
        return error
    raise AssertionError("caller did not raise")


def test_a_failure_is_captured_innermost_first_with_its_locals():
    snapshot = capture_exception(raised(), {"pid": 1})
    assert snapshot.reason == "exception" and snapshot.id.startswith("x")
    assert snapshot.exception is not None
    assert snapshot.exception.type_name == "ValueError"
    assert snapshot.exception.message == "bad config 0.1"
    assert "raise ValueError" in snapshot.exception.traceback_text
    names = [frame.function for frame in snapshot.frames]
    assert names == ["fails", "caller", "raised"]
    inner = snapshot.frames[0]
    assert inner.path == __file__
    assert inner.source is not None
    assert "raise ValueError" in inner.source.splitlines()[inner.line - 1]
    assert local(snapshot, 0, "rows").repr == "[0, 1, 2]"
    assert [c.repr for c in local(snapshot, 0, "rows").children or []] == ["0", "1", "2"]
    model = local(snapshot, 0, "model")
    assert child(model, "name").repr == "'m'" and child(model, "layers").type_name == "list"


def test_containers_are_expanded_three_levels_deep():
    snapshot = capture_exception(raised(), {})
    config = local(snapshot, 1, "config")
    first = child(child(config, "['layers']"), "[0]")  # levels 1 and 2
    act = child(first, "['act']")  # level 3: shown, its parts not
    assert act.repr == "{'name': 'relu'}" and act.children is None and act.truncated
    assert child(first, "['units']").repr == "8"


def test_width_and_repr_length_are_capped():
    limits = SnapshotLimits(width=5, repr_chars=20)
    many = list(range(50))
    text = "y" * 500
    snapshot = capture_point(sys._getframe(), {}, limits)
    values = snapshot.frames[0].locals
    shown = next(value for value in values if value.name == "many")
    assert len(shown.children or []) == 5 and shown.truncated
    long = next(value for value in values if value.name == "text")
    assert len(long.repr) <= 20 and long.truncated
    assert many and text


def test_a_snapshot_stays_under_its_byte_limit():
    limits = SnapshotLimits(max_bytes=20_000)
    big = [str(index) * 50 for index in range(100)]
    bigger = [[str(index) * 50 for index in range(100)] for _ in range(100)]
    snapshot = capture_point(sys._getframe(), {}, limits)
    size = len(json.dumps(snapshot.to_json()))
    # Every frame is kept (where it is, and a value saying its locals were cut).
    assert size <= 20_000 + 400 * len(snapshot.frames), size
    values = snapshot.frames[0].locals
    assert values[-1].name == CUT_NAME or any(value.truncated for value in values)
    assert big and bigger


def test_a_cycle_and_a_repr_that_raises_do_not_break_capture():
    class Broken:
        def __repr__(self):
            raise RuntimeError("no repr")

    loop: list = []
    loop.append(loop)
    broken = Broken()
    snapshot = capture_point(sys._getframe(), {})
    values = {value.name: value for value in snapshot.frames[0].locals}
    assert values["broken"].repr.startswith("<Broken instance at")  # reprlib's fallback
    inner = child(values["loop"], "[0]")
    assert inner.children is None and inner.truncated
    assert broken and loop


def test_hidden_files_are_left_out_and_frames_are_capped():
    frames = capture_frames(sys._getframe(), SnapshotLimits(max_frames=2),
                            hide=lambda path: path == __file__)
    assert len(frames) == 2 and all(frame.path != __file__ for frame in frames)


def test_modules_and_functions_are_leaves():
    module, function, kind = json, capture_point, Model
    snapshot = capture_point(sys._getframe(), {})
    shown = {value.name: value for value in snapshot.frames[0].locals}
    assert [shown[name].children for name in ("module", "function", "kind")] == [None] * 3
    assert shown["module"].type_name == "module"
    assert module and function and kind


def test_the_rate_limit_allows_a_burst_then_one_per_refill():
    now = [0.0]
    rate = RateLimit(SnapshotLimits(burst=2, refill_seconds=10), clock=lambda: now[0])
    assert [rate.allow() for _ in range(3)] == [True, True, False]
    now[0] = 9.0
    assert not rate.allow()
    now[0] = 10.5
    assert rate.allow() and not rate.allow()
    assert rate.refused == 3

