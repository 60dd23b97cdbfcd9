"""The agent's side of a failure snapshot, in memory: captured and posted on the link (kept
across a reconnect), never waiting for the hub, rate-limited, and never raising."""

from __future__ import annotations

import pickle
from typing import Any

import pytest

from raydebug.agent import snapshot_sender
from raydebug.protocol.control import ControlMessage, SnapshotTaken
from raydebug.snapshots.format import Snapshot
from raydebug.snapshots.limits import RateLimit, SnapshotLimits


class RecordingLink:
    """What the sender asks of a HubLink."""

    def __init__(self) -> None:
        self.posted: list[tuple[ControlMessage, bool]] = []
        self.started = False

    def start(self) -> None:
        self.started = True

    def post(self, message: ControlMessage, keep: bool = False) -> None:
        self.posted.append((message, keep))

    def wait_sent(self, timeout: float) -> bool:
        return False  # not connected: it waits in the queue

    def wait_kept_sent(self, timeout: float) -> bool:
        return True


@pytest.fixture(autouse=True)
def fresh_rate(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(snapshot_sender, "_rate",
                        RateLimit(SnapshotLimits(burst=2, refill_seconds=3600)))
    monkeypatch.setattr(snapshot_sender, "_said", set())


def failure() -> BaseException:
    def train(step: int) -> None:
        loss = float("nan")
        raise FloatingPointError(f"loss {loss} at step {step}")

    try:
        train(7)
    except FloatingPointError as error:
        return error
    raise AssertionError("train did not raise")


def test_a_failure_is_posted_kept_with_the_tasks_identity():
    link = RecordingLink()
    snapshot_id = snapshot_sender.send_failure(failure(), link,
                                               identity={"task_name": "train", "job_id": "01"})
    [(message, keep)] = link.posted
    assert keep and link.started and isinstance(message, SnapshotTaken)
    snapshot = Snapshot.from_json(message.snapshot)
    assert snapshot.id == snapshot_id and snapshot.reason == "exception"
    assert snapshot.process["task_name"] == "train" and snapshot.process["job_id"] == "01"
    assert snapshot.exception is not None
    assert snapshot.exception.message == "loss nan at step 7"
    assert [(v.name, v.repr) for v in snapshot.frames[0].locals] == [
        ("step", "7"), ("loss", "nan")]


def test_past_the_rate_nothing_is_taken_and_that_is_said_once(
        capsys: pytest.CaptureFixture[str]):
    link = RecordingLink()
    ids = [snapshot_sender.send_failure(failure(), link) for _ in range(4)]
    assert ids[2:] == [None, None] and all(ids[:2]) and len(link.posted) == 2
    err = capsys.readouterr().err
    assert err.count("snapshots past 2 at once, then one per 3600 s, are not taken") == 1


def test_a_link_that_fails_is_one_line_and_no_exception(capsys: pytest.CaptureFixture[str]):
    class BrokenLink(RecordingLink):
        def post(self, message: ControlMessage, keep: bool = False) -> Any:
            raise OSError("the socket is gone")

    assert snapshot_sender.send_failure(failure(), BrokenLink()) is None
    assert "no snapshot taken (OSError: the socket is gone)" in capsys.readouterr().err


def test_a_failure_reported_twice_is_taken_once():
    # Ray's executor calls its failure hook twice for a failing async generator's task (a
    # Ray Serve replica's HTTP request)
    link, error = RecordingLink(), failure()
    first = snapshot_sender.send_failure(error, link)
    assert first and snapshot_sender.send_failure(error, link) is None
    assert len(link.posted) == 1
    elsewhere = pickle.loads(pickle.dumps(error))  # as a Ray task's error reaches its driver
    vars(elsewhere)[snapshot_sender.TAKEN_MARK] = "another process's"  # (its own mark)
    assert snapshot_sender.send_failure(elsewhere, link)  # (the rate allows 2)
