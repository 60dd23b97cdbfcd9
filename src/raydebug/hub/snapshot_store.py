"""The snapshots the hub keeps: the last N in memory, and on disk when asked.

Theory of operation. An agent's ``SnapshotTaken`` is read into a
:class:`~raydebug.snapshots.format.Snapshot` (:meth:`SnapshotStore.receive`: a malformed one
is the agent's error) and kept here after its process, its job and its worker are gone: the
last :attr:`SnapshotStore.capacity` (1,000 by default, ``raydebug hub --max-snapshots``), the
oldest dropped first. With ``raydebug hub --snapshot-dir DIR`` each is also a JSON file
``DIR/<id>.json`` (the :meth:`Snapshot.to_json` dict; the directory 0700, each file 0600:
locals can hold secrets), written off the event loop, deleted with its snapshot, and read
back when a hub starts (:meth:`SnapshotStore.load`), newest kept. A file that cannot be read
is logged and left where it is.

Clients see snapshots only through the client port, admitted as for sessions: the listing
(:meth:`summaries`, ``GET /api/snapshots``) and, by id, the snapshot itself
(:meth:`get`) for a read-only session.
"""

from __future__ import annotations

import asyncio
import collections
import dataclasses
import json
import logging
import os
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from ..errors import RemoteProtocolError, SnapshotFormatError
from ..snapshots.format import Snapshot

log = logging.getLogger("raydebug.hub")

DEFAULT_CAPACITY = 1_000
# What the hub's view of a process says of its moment, left out of a snapshot's record.
_MOMENTARY = ("state", "sessions", "live", "pause_requested", "activity_stale")
# What a listing row says of the process (the rest is in the snapshot).
_PROCESS_FIELDS = ("pid", "host", "node_id", "node_ip", "job_id", "task_name", "actor_class",
                   "labels")


class SnapshotStore:
    """The hub's snapshots, oldest first; ``directory`` keeps them across restarts."""

    def __init__(self, capacity: int = DEFAULT_CAPACITY, directory: Path | None = None,
                 clock: Callable[[], float] = time.time) -> None:
        self.capacity = capacity
        self.directory = directory
        self._clock = clock
        self._snapshots: collections.OrderedDict[str, Snapshot] = collections.OrderedDict()
        self.version = 0  # counts every change: a listing says which it shows
        self.received = 0
        self._waiters: list[asyncio.Future[None]] = []

    # -- in memory ----------------------------------------------------------------------------

    def receive(self, data: dict[str, Any],
                process: dict[str, Any]) -> tuple[Snapshot, list[str]]:
        """Read an agent's snapshot and keep it; ``process`` (the hub's view of the sending
        process) fills in what the snapshot's own record leaves out (the hub's ``id``).
        Returns it and the ids dropped to make room (see :meth:`add`). Raises
        :class:`RemoteProtocolError` (:class:`SnapshotFormatError`) for a dict that is not a
        snapshot."""
        snapshot = Snapshot.from_json(data)  # SnapshotFormatError: a RemoteProtocolError
        if snapshot.id in self._snapshots or not snapshot.id.isalnum():
            raise RemoteProtocolError(f"snapshot id {snapshot.id!r} is taken or not a name")
        # What the hub knows of the process that holds at any time (not its state, its
        # sessions, whether it is live, or a pause request: those of this moment).
        lasting = {key: value for key, value in process.items() if key not in _MOMENTARY}
        merged = {**lasting, **snapshot.process, "id": process.get("id")}
        snapshot = dataclasses.replace(snapshot, process=merged)
        self.received += 1
        return snapshot, self.add(snapshot)

    def add(self, snapshot: Snapshot) -> list[str]:
        """Keep ``snapshot`` (newest); the ids of those dropped to stay within capacity."""
        self._snapshots[snapshot.id] = snapshot
        dropped = []
        while len(self._snapshots) > self.capacity:
            dropped.append(self._snapshots.popitem(last=False)[0])
        self._changed()
        return dropped

    def get(self, snapshot_id: str) -> Snapshot | None:
        return self._snapshots.get(snapshot_id)

    def all(self) -> list[Snapshot]:
        """Every snapshot kept, oldest first."""
        return list(self._snapshots.values())

    def remove(self, ids: Iterable[str]) -> list[str]:
        """Drop these snapshots; the ids that were kept."""
        removed = [snapshot_id for snapshot_id in ids
                   if self._snapshots.pop(snapshot_id, None) is not None]
        if removed:
            self._changed()
        return removed

    async def wait_for_version_after(self, version: int) -> None:
        """Return once the snapshots changed after ``version`` (a long-poll's wait)."""
        while self.version <= version:
            waiter = asyncio.get_running_loop().create_future()
            self._waiters.append(waiter)
            await waiter

    def _changed(self) -> None:
        self.version += 1
        waiters, self._waiters = self._waiters, []
        for waiter in waiters:
            if not waiter.done():  # (one whose long-poll ran out is cancelled)
                waiter.set_result(None)

    def summaries(self) -> list[dict[str, Any]]:
        """One row per snapshot, newest first: what ``raydebug list`` shows of it."""
        now = self._clock()
        return [summary(snapshot, now) for snapshot in reversed(self._snapshots.values())]

    # -- on disk ------------------------------------------------------------------------------

    def load(self) -> int:
        """Read the snapshots of :attr:`directory` (made 0700 if missing), newest kept up to
        capacity; how many. Call before serving."""
        if self.directory is None:
            return 0
        self.directory.mkdir(mode=0o700, parents=True, exist_ok=True)
        found = []
        for path in self.directory.glob("*.json"):
            try:
                found.append(Snapshot.from_json(json.loads(path.read_text(encoding="utf-8"))))
            except (OSError, ValueError, SnapshotFormatError) as error:
                log.warning("snapshot file %s not read: %s", path, error)
        found.sort(key=lambda snapshot: snapshot.time)
        for snapshot in found:
            for dropped in self.add(snapshot):
                self._delete_file(dropped)
        return len(self._snapshots)

    async def save(self, snapshot: Snapshot, dropped: Iterable[str] = ()) -> None:
        """Write ``snapshot``'s file and delete the dropped ones' (with a directory), off
        the event loop; an error is logged (the snapshot stays in memory)."""
        if self.directory is not None:
            await asyncio.to_thread(self._write, snapshot, list(dropped))

    async def delete(self, ids: Iterable[str]) -> None:
        if self.directory is not None:
            await asyncio.to_thread(self._delete_files, list(ids))

    def _delete_files(self, ids: list[str]) -> None:
        for snapshot_id in ids:
            self._delete_file(snapshot_id)

    def _write(self, snapshot: Snapshot, dropped: list[str]) -> None:
        assert self.directory is not None
        path = self.directory / f"{snapshot.id}.json"
        partial = path.with_suffix(".partial")
        try:
            descriptor = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            with os.fdopen(descriptor, "w", encoding="utf-8") as handle:
                json.dump(snapshot.to_json(), handle)
            os.replace(partial, path)
        except OSError as error:
            log.warning("snapshot %s not written to %s: %s", snapshot.id, path, error)
        self._delete_files(dropped)

    def _delete_file(self, snapshot_id: str) -> None:
        if self.directory is None:
            return
        try:
            (self.directory / f"{snapshot_id}.json").unlink(missing_ok=True)
        except OSError as error:
            log.warning("snapshot file of %s not deleted: %s", snapshot_id, error)


def summary(snapshot: Snapshot, now: float) -> dict[str, Any]:
    """A snapshot's listing row: id, reason, when (``time``, ``age`` seconds), the
    process's identities, the exception (``Type: message``) and where (the innermost
    frame's ``file``, ``line``, ``function``)."""
    row: dict[str, Any] = {"id": snapshot.id, "reason": snapshot.reason,
                           "time": snapshot.time, "age": max(0.0, now - snapshot.time),
                           "thread_name": snapshot.thread_name,
                           "process_id": snapshot.process.get("id")}
    row.update({name: snapshot.process.get(name) for name in _PROCESS_FIELDS})
    if snapshot.exception is not None:
        message = snapshot.exception.message
        row["exception"] = (f"{snapshot.exception.type_name}: {message}" if message
                            else snapshot.exception.type_name)
    if snapshot.frames:
        top = snapshot.frames[0]
        row.update(file=top.path, line=top.line, function=top.function)
    return row
