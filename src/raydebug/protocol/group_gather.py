"""A group session's request sent to several processes, answered once: :class:`Gather`
waits for each process's answer (or its leaving), :func:`merged` makes the one answer.

``threads`` merges every process's threads, sorted by rank then pid (DAP "Threads
Request": all threads); ``continue`` succeeds, ``allThreadsContinued: true``, when any
process continued (DAP "Continue Request"), and fails with every process's reason when none
did; anything else (``disconnect``) succeeds once all have answered.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from .group_rewrite import Member
from .messages import Request, Response
from .proxy_policy import failure, success


@dataclass
class Gather:
    """A client request sent to several processes, until each has answered or left."""

    request: Request
    owed: set[str]  # the keys of the processes that have not answered
    answers: list[tuple[Member, Response]] = field(default_factory=list)


def merged(gather: Gather, present: Callable[[str], bool]) -> Response:
    """The one answer to ``gather``'s request, once nothing is owed; ``present(key)``: the
    process is still in the group (the threads of one that left are not listed)."""
    request, answers = gather.request, gather.answers
    if request.command == "threads":
        threads = [thread for member, answer in sorted(answers, key=lambda a: a[0].order())
                   if answer.success and present(member.key)
                   for thread in answer.body["threads"]]
        return success(request, {"threads": threads})
    if request.command == "continue" and answers and not any(
            answer.success for _, answer in answers):
        return failure(request, "; ".join(sorted(
            f"{member.prefix}{answer.message}" for member, answer in answers)))
    body = {"allThreadsContinued": True} if request.command == "continue" else {}
    return success(request, body)
