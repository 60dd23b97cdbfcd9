"""A group session's running processes: live processes of the group with no debugger yet.

Theory of operation. A running live process (linked from its start, listed by ``raydebug
ps``, no thread paused) has no debugger: pydevd is not even imported in it, and it runs at
full speed. The group's client is still shown its threads, as running threads, as its agent
reports them (its stacks: each visible Python thread's ident and name, the debugger's and
raydebug's own left out), asked when the process enters the group and again at each
``threads`` request (an answer that does not come keeps the last one).

Their client ids come from the group's :class:`~.group_ids.GroupIds` under a key of their
own (:func:`running_key`): an agent's thread ident and a pydevd thread id of the same
process never meet. When the process pauses it joins the group with a debugger connection
(:meth:`RunningMembers.remove`): its running thread ids exit, and its debugger's threads
(pydevd numbers them itself) come with their ``stopped`` events. A thread that appears or
ends between two reports is told to the client as a ``thread`` event, ``started`` or
``exited``, as a debugger tells its own.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from .group_gather import Gather
from .group_ids import GroupIds
from .group_rewrite import Member
from .messages import Event
from .proxy_policy import success

RUNNING = " running"  # appended to a process's key: the ids of its running threads


def running_key(key: str) -> str:
    """The key under which ``key``'s running threads have their client ids."""
    return key + RUNNING


@dataclass
class _Running:
    member: Member
    threads: dict[int, str] = field(default_factory=dict)  # ident -> name, as last reported


class RunningMembers:
    """The group's running processes, by key, and their threads as last reported."""

    def __init__(self, ids: GroupIds) -> None:
        self._ids = ids
        self._running: dict[str, _Running] = {}
        self._owed: list[Gather] = []  # ``threads`` requests waiting for reports, oldest first

    def __contains__(self, key: object) -> bool:
        return key in self._running

    def __iter__(self) -> Iterator[str]:
        return iter(self._running)

    def __len__(self) -> int:
        return len(self._running)

    def add(self, member: Member) -> bool:
        """``member`` runs and is in the group; False when it was already."""
        if member.key in self._running:
            return False
        self._running[member.key] = _Running(member)
        return True

    def member(self, key: str) -> Member:
        return self._running[key].member

    def owner(self, ids_key: str) -> str | None:
        """The running process whose threads' ids are kept under ``ids_key`` (None: that
        key is a joined process's, or one that no longer runs in the group)."""
        if not ids_key.endswith(RUNNING):
            return None
        key = ids_key[:-len(RUNNING)]
        return key if key in self._running else None

    def reported(self, key: str, threads: Sequence[dict[str, Any]] | None) -> list[Event]:
        """``key``'s agent reported ``threads`` (its stacks' ``{"id", "name", ...}``; None:
        it did not answer, the last report stands). Returns the ``thread`` events that tell
        the client which threads started and exited since the last report."""
        running = self._running.get(key)
        if running is None or threads is None:
            return []
        now = {item["id"]: str(item.get("name", "")) for item in threads
               if isinstance(item.get("id"), int)}
        before, running.threads = running.threads, now
        ids_key = running_key(key)
        events = [Event(0, "thread", {"reason": "started",
                                      "threadId": self._ids.thread_to_client(ids_key, ident)})
                  for ident in now if ident not in before]
        for ident in before:
            if ident not in now and (client := self._ids.thread_exited(ids_key, ident)):
                events.append(Event(0, "thread", {"reason": "exited", "threadId": client}))
        return events

    def thread_name(self, key: str, ident: int) -> str:
        """Thread ``ident`` of running ``key`` named where it lives, as ``threads`` lists it."""
        running = self._running[key]
        return running.member.thread_name(running.threads.get(ident, f"thread {ident}"))

    def client_threads(self, key: str) -> list[dict[str, Any]]:
        """``key``'s threads as a ``threads`` answer lists them: the group's ids, each
        named where it lives."""
        running = self._running[key]
        ids_key = running_key(key)
        return [{"id": self._ids.thread_to_client(ids_key, ident),
                 "name": running.member.thread_name(name)}
                for ident, name in running.threads.items()]

    def owe(self, gather: Gather) -> None:
        """``gather`` (a ``threads``) waits for a report of each running process it owes."""
        self._owed.append(gather)

    def report_given(self, key: str) -> list[Gather]:
        """``key`` reported (or no longer runs): the ``threads`` requests that waited for it
        have its threads among their answers now (none if it no longer runs). Returns
        them; those that owe nothing more are answered by the caller."""
        given = [gather for gather in self._owed if key in gather.owed]
        for gather in given:
            gather.owed.discard(key)
            if key in self._running:
                gather.answers.append((self._running[key].member, success(gather.request, {
                    "threads": self.client_threads(key)})))
        self._owed = [gather for gather in self._owed if gather.owed]
        return given

    def remove(self, key: str) -> list[Event]:
        """``key`` no longer runs in the group (it paused and joins, or it exited): the
        client is told its running threads exited, and their ids go."""
        if self._running.pop(key, None) is None:
            return []
        return [Event(0, "thread", {"reason": "exited", "threadId": client})
                for client in self._ids.left(running_key(key))]
