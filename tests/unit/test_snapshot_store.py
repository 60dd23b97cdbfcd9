"""The hub's snapshots: kept to a capacity, listed, dropped, on disk 0600 and read back;
and the agent's outbox keeping a snapshot across a reconnect."""

from __future__ import annotations

import asyncio
import json
import socket
import stat
from pathlib import Path

import pytest

from raydebug.agent.link.outbox import KEPT_OF_TYPE, MAX_KEPT, Outbox
from raydebug.errors import RemoteProtocolError
from raydebug.hub.snapshot_store import SnapshotStore
from raydebug.protocol.control import LogpointOutput, SnapshotTaken, decode_control
from raydebug.snapshots.format import ExceptionInfo, FrameCapture, Snapshot, Value
from raydebug.views_snapshots import snapshots_table


def snapshot(number: int, **process: object) -> Snapshot:
    return Snapshot(id=f"x{number:04d}", reason="exception", time=1000.0 + number,
                    process={"pid": number, "host": "h", **process}, thread_name="MainThread",
                    exception=ExceptionInfo("ValueError", f"bad {number}", "Traceback..."),
                    frames=[FrameCapture("step", "/job/train.py", 12, "x = 1\n",
                                         [Value("x", "int", "1")])])


def test_the_oldest_is_dropped_beyond_capacity():
    store = SnapshotStore(capacity=2)
    assert store.add(snapshot(1)) == [] and store.add(snapshot(2)) == []
    assert store.add(snapshot(3)) == ["x0001"]
    assert [s.id for s in store.all()] == ["x0002", "x0003"]
    assert store.get("x0001") is None and store.get("x0003") == snapshot(3)


def test_a_listing_row_says_task_node_exception_and_where():
    store = SnapshotStore(clock=lambda: 1010.0)
    store.add(snapshot(1, task_name="train_step", node_ip="10.0.0.7"))
    store.add(snapshot(2))
    newest, oldest = store.summaries()
    assert newest["id"] == "x0002"
    assert oldest == {**oldest, "id": "x0001", "task_name": "train_step",
                      "node_ip": "10.0.0.7", "exception": "ValueError: bad 1",
                      "file": "/job/train.py", "line": 12, "function": "step", "age": 9.0}
    table = snapshots_table(store.summaries(), now=1010.0, width=100)
    from rich.console import Console

    console = Console(width=100, record=True, color_system=None)
    console.print(table)
    text = console.export_text()
    assert "2 snapshots" in text
    assert "x0001     train_step  10.0.0.7  1    ValueError: bad 1  /job/train.py:12  9s" \
        in text


def test_what_an_agent_sends_is_checked_and_merged_with_the_hub_view():
    store = SnapshotStore()
    kept, dropped = store.receive(snapshot(1).to_json(), {"id": "p1", "pid": 1, "host": "h",
                                                          "labels": {"rank": "0"},
                                                          "state": "running", "sessions": []})
    assert kept.process["id"] == "p1" and kept.process["labels"] == {"rank": "0"}
    assert "state" not in kept.process and "sessions" not in kept.process
    assert dropped == []
    with pytest.raises(RemoteProtocolError, match="taken"):
        store.receive(snapshot(1).to_json(), {})  # an id already kept
    with pytest.raises(RemoteProtocolError, match=r"snapshot\.reason"):
        store.receive({**snapshot(2).to_json(), "reason": "paused"}, {})
    with pytest.raises(RemoteProtocolError, match="not a name"):
        store.receive({**snapshot(3).to_json(), "id": "../etc/passwd"}, {})


def test_removed_ones_are_gone_and_a_long_poll_wakes():
    async def scenario() -> list[str]:
        store = SnapshotStore()
        store.add(snapshot(1))
        version = store.version
        waiting = asyncio.ensure_future(store.wait_for_version_after(version))
        await asyncio.sleep(0)
        assert not waiting.done()
        removed = store.remove(["x0001", "x9999"])
        await asyncio.wait_for(waiting, 5)
        return removed

    assert asyncio.run(scenario()) == ["x0001"]


def test_on_disk_each_file_is_private_and_read_back_newest_kept(tmp_path: Path):
    directory = tmp_path / "snaps"
    store = SnapshotStore(capacity=2, directory=directory)
    assert store.load() == 0
    assert stat.S_IMODE(directory.stat().st_mode) == 0o700

    async def keep_three() -> None:
        for number in (1, 2, 3):
            await store.save(snapshot(number), store.add(snapshot(number)))

    asyncio.run(keep_three())
    files = sorted(path.name for path in directory.iterdir())
    assert files == ["x0002.json", "x0003.json"]  # the dropped one's file deleted
    assert all(stat.S_IMODE((directory / name).stat().st_mode) == 0o600 for name in files)
    (directory / "broken.json").write_text("{not json")
    again = SnapshotStore(capacity=1, directory=directory)
    assert again.load() == 1
    assert [s.id for s in again.all()] == ["x0003"] and again.get("x0003") == snapshot(3)
    assert json.loads((directory / "x0003.json").read_text())["format"] == 1
    asyncio.run(again.delete(["x0003"]))
    assert not (directory / "x0003.json").exists()


def test_a_snapshot_travels_as_a_control_message():
    message = SnapshotTaken(snapshot=snapshot(1).to_json())
    from raydebug.protocol.control import encode_control

    body = encode_control(message).split(b"\r\n\r\n", 1)[1]
    assert Snapshot.from_json(decode_control(body).snapshot) == snapshot(1)


def written(outbox: Outbox) -> list[str]:
    left, right = socket.socketpair()
    with left, right:
        outbox.write_to(left)
        left.shutdown(socket.SHUT_WR)
        data = b""
        while chunk := right.recv(65536):
            data += chunk
    return [part.split(b'"type":"')[1].split(b'"')[0].decode()
            for part in data.split(b"Content-Length")[1:]]


def test_a_kept_message_survives_a_reconnect_others_do_not():
    outbox = Outbox()
    outbox.put(LogpointOutput(text="dropped"))
    outbox.put(SnapshotTaken(snapshot={"id": "x1"}), keep=True)
    assert outbox.waiting_kept()
    outbox.clear()  # a new connection
    assert written(outbox) == ["snapshot_taken"]
    assert not outbox.waiting_kept()


def test_kept_messages_are_bounded_the_oldest_dropped():
    outbox = Outbox()
    for number in range(MAX_KEPT + 3):
        outbox.put(SnapshotTaken(snapshot={"id": f"x{number}"}), keep=True)
    outbox.clear()
    assert len(written(outbox)) == MAX_KEPT


def test_a_logpoint_line_kept_survives_a_connect_and_many_are_kept(
        monkeypatch: pytest.MonkeyPatch):
    """A logpoint's line posted before the link's first connection (a Ray worker armed from
    the cluster's KV logs meanwhile) or during a reconnection is written after the connect,
    not dropped with the stale session messages (a loaded fresh-clone run lost lines so);
    its type is kept in greater number than snapshots, each type bounded apart."""
    outbox = Outbox()
    for number in range(MAX_KEPT + 5):
        outbox.put(LogpointOutput(text=f"line {number}"), keep=True)
    for number in range(MAX_KEPT + 2):
        outbox.put(SnapshotTaken(snapshot={"id": f"x{number}"}), keep=True)
    outbox.clear()  # the connect
    kinds = written(outbox)
    assert kinds.count("logpoint_output") == MAX_KEPT + 5
    assert kinds.count("snapshot_taken") == MAX_KEPT
    assert KEPT_OF_TYPE["logpoint_output"] >= 1_000
    monkeypatch.setitem(KEPT_OF_TYPE, "logpoint_output", MAX_KEPT + 10)  # (a socketpair's room)
    for number in range(MAX_KEPT + 12):
        outbox.put(LogpointOutput(text=f"line {number}"), keep=True)
    outbox.clear()
    assert written(outbox).count("logpoint_output") == MAX_KEPT + 10  # the oldest dropped


def test_a_message_over_the_limit_is_dropped_and_the_rest_written(
        capsys: pytest.CaptureFixture[str]):
    outbox = Outbox()
    outbox.put(SnapshotTaken(snapshot={"id": "x1", "big": "y" * (2 << 20)}), keep=True)
    outbox.put(LogpointOutput(text="after"))
    assert written(outbox) == ["logpoint_output"]
    assert not outbox.waiting_kept()
    assert "a snapshot_taken message was not sent" in capsys.readouterr().err
