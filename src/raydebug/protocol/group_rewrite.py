"""A process's messages as a group session's client reads them.

A group session (:mod:`.group_policy`) shows one client the threads of many processes: each
thread is named where it lives (:meth:`Member.thread_name`, sorted by :meth:`Member.order`),
each line of output says which process wrote it (:mod:`.group_output`), and every id in
an answer is made the group's (:func:`client_body`, a ``<command>_response`` per answer
that holds ids, through :mod:`.group_ids`).
"""

from __future__ import annotations

from collections.abc import Callable
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


@dataclass(frozen=True)
class ProcessAnswer:
    """What one process's answer is made the client's with: the group's ``ids``, the
    ``member`` it came from, and the process's ``thread`` its frames and variables belong
    to (the thread the request named, or the frame's or variable's)."""

    ids: GroupIds
    member: Member
    thread: int | None

    def reference(self, item: dict[str, Any]) -> dict[str, Any]:
        """``item`` (a scope, a variable, an answer, an output) with its
        ``variablesReference`` made the client's."""
        local = item.get("variablesReference")
        if not isinstance(local, int):
            return item
        client = self.ids.ref_to_client(VARIABLES, self.member.key, local, self.thread)
        return {**item, "variablesReference": client}

    def source(self, item: dict[str, Any]) -> dict[str, Any]:
        """``item`` (a frame, a scope) with its ``source.sourceReference`` made the
        client's (a source lives as long as its process: it belongs to no thread)."""
        source = item.get("source")
        if not isinstance(source, dict) or not source.get("sourceReference"):
            return item
        client = self.ids.ref_to_client(SOURCE, self.member.key, source["sourceReference"],
                                        None)
        return {**item, "source": {**source, "sourceReference": client}}


def threads_response(answer: ProcessAnswer, body: dict[str, Any]) -> dict[str, Any]:
    member = answer.member
    return {"threads": [{**item, "id": answer.ids.thread_to_client(member.key, item["id"]),
                         "name": member.thread_name(str(item.get("name", "")))}
                        for item in body.get("threads", []) if isinstance(item.get("id"), int)]}


def stackTrace_response(answer: ProcessAnswer, body: dict[str, Any]) -> dict[str, Any]:
    key, thread = answer.member.key, answer.thread
    frames = [answer.source({**frame, "id": answer.ids.ref_to_client(FRAME, key, frame["id"],
                                                                      thread)})
              for frame in body.get("stackFrames", []) if isinstance(frame.get("id"), int)]
    return {**body, "stackFrames": frames}


def scopes_response(answer: ProcessAnswer, body: dict[str, Any]) -> dict[str, Any]:
    return {**body, "scopes": [answer.source(answer.reference(scope))
                               for scope in body.get("scopes", [])]}


def variables_response(answer: ProcessAnswer, body: dict[str, Any]) -> dict[str, Any]:
    return {**body, "variables": [answer.reference(item) for item in body.get("variables", [])]}


def evaluate_response(answer: ProcessAnswer, body: dict[str, Any]) -> dict[str, Any]:
    return answer.reference(body)


def continue_response(answer: ProcessAnswer, body: dict[str, Any]) -> dict[str, Any]:
    return {**body, "allThreadsContinued": False}  # the rest of the group stays paused


# The answers that hold a process's ids; any other passes as it is.
RESPONSES: dict[str, Callable[[ProcessAnswer, dict[str, Any]], dict[str, Any]]] = {
    "threads": threads_response, "stackTrace": stackTrace_response,
    "scopes": scopes_response, "variables": variables_response,
    "evaluate": evaluate_response, "setExpression": evaluate_response,
    "setVariable": evaluate_response, "continue": continue_response,
}


def client_body(answer: ProcessAnswer, command: str, body: dict[str, Any]) -> dict[str, Any]:
    """The body of a process's successful answer to ``command`` as the client reads it:
    its ids made the client's, its threads named where they live."""
    rewrite = RESPONSES.get(command)
    return body if rewrite is None else rewrite(answer, body)
