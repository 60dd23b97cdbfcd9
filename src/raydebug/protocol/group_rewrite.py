"""A process's messages as a group session's client reads them.

A group session (:mod:`.group_policy`) shows one client the threads of many processes: each
thread is named where it lives (:meth:`Member.thread_name`, sorted by :meth:`Member.order`),
each line of output says which process wrote it (:func:`prefixed`), and every id in an
answer is made the group's (:func:`client_body`, through :mod:`.group_ids`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .group_ids import FRAME, SOURCE, VARIABLES, GroupIds


@dataclass(frozen=True)
class Member:
    """A process of the group as the client is shown it: ``key`` (the hub's id for it),
    ``pid``, its ``rank`` label when it has one, and what it runs (``task``)."""

    key: str
    pid: int
    rank: str | None = None
    task: str | None = None

    def thread_name(self, name: str) -> str:
        """``rank 3 · train_step · pid 4242 · MainThread`` (the parts it has)."""
        parts = [f"rank {self.rank}"] if self.rank is not None else []
        return " · ".join([*parts, *([self.task] if self.task else []), f"pid {self.pid}",
                           name])

    @property
    def prefix(self) -> str:
        """``[rank 3 pid 4242] ``, or ``[pid 4242] `` without a rank: an output line's."""
        rank = f"rank {self.rank} " if self.rank is not None else ""
        return f"[{rank}pid {self.pid}] "

    def order(self) -> tuple[int, int, str, int]:
        """Sorts by rank (as a number when it is one; unranked last), then pid."""
        rank = self.rank or ""
        return (0 if rank.isdigit() else 1, int(rank) if rank.isdigit() else 0, rank, self.pid)


def prefixed(text: str, prefix: str, at_line_start: bool) -> str:
    """``text`` with ``prefix`` before each line that starts in it (the first one only when
    ``at_line_start``: the text before went on without a newline)."""
    lines = text.split("\n")
    last = len(lines) - 1
    return "\n".join(prefix + line if (index or at_line_start) and (line or index < last)
                     else line for index, line in enumerate(lines))


def client_body(ids: GroupIds, member: Member, command: str, thread: int | None,
                body: dict[str, Any]) -> dict[str, Any]:
    """The body of ``member``'s answer to ``command`` as the client reads it: its ids made
    the client's (frames and variables belonging to the process's ``thread``), its threads
    named where they live. Other bodies are returned as they are."""
    key = member.key
    if command == "threads":
        return {"threads": [{**item, "id": ids.thread_to_client(key, item["id"]),
                             "name": member.thread_name(str(item.get("name", "")))}
                            for item in body.get("threads", [])
                            if isinstance(item.get("id"), int)]}
    if command == "stackTrace":
        frames = [{**frame, "id": ids.ref_to_client(FRAME, key, frame["id"], thread),
                   **with_source(ids, key, frame)} for frame in body.get("stackFrames", [])
                  if isinstance(frame.get("id"), int)]
        return {**body, "stackFrames": frames}
    if command == "scopes":
        return {**body, "scopes": [with_reference(ids, key, scope, thread)
                                   | with_source(ids, key, scope)
                                   for scope in body.get("scopes", [])]}
    if command == "variables":
        return {**body, "variables": [with_reference(ids, key, variable, thread)
                                      for variable in body.get("variables", [])]}
    if command in ("evaluate", "setExpression", "setVariable"):
        return with_reference(ids, key, body, thread)
    if command == "continue":
        return {**body, "allThreadsContinued": False}  # only this thread's process ran on
    return body

def with_reference(ids: GroupIds, key: str, item: dict[str, Any],
                   thread: int | None) -> dict[str, Any]:
    """``item`` (a scope, a variable, an answer, an output) with process ``key``'s
    ``variablesReference`` made the client's."""
    local = item.get("variablesReference")
    if not isinstance(local, int):
        return item
    return {**item, "variablesReference": ids.ref_to_client(VARIABLES, key, local,
                                                                 thread)}

def with_source(ids: GroupIds, key: str, item: dict[str, Any]) -> dict[str, Any]:
    """``{"source": ...}`` with process ``key``'s ``sourceReference`` made the client's, to
    merge into ``item`` (a frame, a scope); ``{}`` when it has no source by reference."""
    source = item.get("source")
    if not isinstance(source, dict) or not source.get("sourceReference"):
        return {}
    reference = ids.ref_to_client(SOURCE, key, source["sourceReference"], None)
    return {"source": {**source, "sourceReference": reference}}

