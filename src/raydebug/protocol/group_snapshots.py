"""Kept snapshots in a group session: each one a member of the group, read-only.

Theory of operation. A group attach that asks (``"raydebug": {"group": ..., "snapshots":
true}``) is shown the group's kept snapshots as stopped threads beside its processes' (never
unasked: they would clutter a live session). A snapshot joins the
:class:`~.group_policy.GroupPolicy` as a process does (:meth:`GroupSnapshots.join`), and its
"debugger" is a :class:`~.snapshot_session.SnapshotSession` in the hub:
:meth:`GroupSnapshots.send` answers what the policy sends it (its ``ToProcess``) at once, and
hands each message of the answer back to the policy as that process's
(:meth:`~.group_policy.GroupPolicy.from_process`). So ids, gathering, ``stackTrace``,
``variables`` and ``evaluate`` work as for any member, stepping is refused by the snapshot
itself (and the thread is stopped again: the policy took it as running on, its ids gone),
and nothing waits. A ``continue`` (or ``disconnect``) ends its view: it leaves the
group, as a process whose connection closed (:meth:`~.group_policy.GroupPolicy.left`).

Its thread is named as the group names a process's (``rank 3 · train_step · pid 4242 ·
snapshot [ValueError] · MainThread``): the capture's thread name, marked a snapshot.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..snapshots.format import Snapshot
from .group_actions import Action
from .group_policy import STEPS, GroupPolicy
from .group_rewrite import Member
from .messages import Message, Request, Response, encode_message
from .snapshot_session import SnapshotSession


def snapshot_member(snapshot: Snapshot) -> Member:
    """The snapshot as a member of the group: its process's pid, rank label and task."""
    process = snapshot.process
    labels = process.get("labels") or {}
    rank = labels.get("RANK", labels.get("rank")) if isinstance(labels, dict) else None
    return Member(snapshot.id, int(process.get("pid") or 0),
                  None if rank is None else str(rank), process.get("task_name"))


def snapshot_thread_name(snapshot: Snapshot) -> str:
    """``snapshot [ValueError] · MainThread``: its thread's name, marked a snapshot."""
    kind = f" [{snapshot.exception.type_name}]" if snapshot.exception is not None else ""
    return f"snapshot{kind} · {snapshot.thread_name}"


class GroupSnapshots:
    """The snapshots one group session shows, each served by its own read-only session."""

    def __init__(self, policy: GroupPolicy) -> None:
        self._policy = policy
        self._views: dict[str, SnapshotSession] = {}  # by snapshot id (its member's key)
        self._shown: set[str] = set()  # every snapshot joined: one whose view ended stays out

    def __contains__(self, key: str) -> bool:
        return key in self._views

    def join(self, snapshots: Sequence[Snapshot], initialize: dict[str, Any],
             attach: dict[str, Any]) -> list[Action]:
        """Join ``snapshots`` (those not shown yet: one whose view was ended stays out) to the
        group, set up as a process's debugger is; what the policy sends them is for
        :meth:`send`."""
        actions: list[Action] = []
        for snapshot in snapshots:
            if snapshot.id not in self._shown:
                self._shown.add(snapshot.id)
                self._views[snapshot.id] = SnapshotSession(snapshot)
                actions += self._policy.join(snapshot_member(snapshot), initialize, attach)
        return actions

    def send(self, key: str, message: Message, now: float) -> list[Action]:
        """Snapshot ``key`` answers ``message`` (what the policy sent it); what the policy
        does with the answer, and the snapshot's leaving once its view has ended."""
        view = self._views.get(key)
        if view is None or not isinstance(message, Request):
            return []
        actions: list[Action] = []
        for answer in view.handle(message):
            if isinstance(answer, Response) and answer.command == "threads" and answer.success:
                answer.body["threads"] = [{**thread, "name": snapshot_thread_name(
                    view.snapshot)} for thread in answer.body.get("threads", [])]
            actions += self._policy.from_process(key, encode_message(answer), now)
        if message.command in STEPS:  # refused; the policy took the thread as running on
            actions += self._policy.from_process(key, encode_message(view.stopped()), now)
        if message.command in ("continue", "disconnect"):
            del self._views[key]
            actions += self._policy.left(key)
        return actions
