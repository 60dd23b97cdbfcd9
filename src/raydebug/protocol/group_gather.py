"""What a group session's hub has asked the processes and not had answered yet.

Each joined process (:class:`Joined`) numbers the hub's requests on its data connection
from 1 (:func:`ask`) and notes each (:class:`Asked`) until its answer: the client's request
it serves, or None for the hub's own. A client request sent to several processes waits in
a :class:`Gather` for each one's answer (or its leaving); :func:`merged` makes its one answer.

``threads`` merges every process's threads, sorted by rank then pid (DAP "Threads
Request": all threads); ``continue`` succeeds, ``allThreadsContinued: true``, when any
process continued (DAP "Continue Request"), and fails with every process's reason when none
did; anything else (``disconnect``) succeeds once all have answered.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from .group_actions import ToProcess
from .group_rewrite import Member
from .messages import Request, Response
from .paths import PathTranslator
from .proxy_policy import failure, success


@dataclass
class Gather:
    """A client request sent to several processes, until each has answered or left."""

    request: Request
    owed: set[str]  # the keys of the processes that have not answered
    answers: list[tuple[Member, Response]] = field(default_factory=list)


@dataclass
class Asked:
    """A request sent to one process until its answer: the client's (None: the hub's own
    set-up), the gather it is part of, the process's thread its answer's ids belong to."""

    command: str
    request: Request | None
    gather: Gather | None = None
    thread: int | None = None


@dataclass
class Joined:
    """A member with a data connection to its debugger, and the hub's dealings with it."""

    member: Member
    configuration: list[Request]
    paths: PathTranslator | None = None  # its code's directory <-> the client's checkout
    next_seq: int = 1
    asked: dict[int, Asked] = field(default_factory=dict)  # by the hub's seq
    stopped: set[int] = field(default_factory=set)  # its threads stopped, its ids
    attached: bool = False  # its debugger answered the hub's attach


def ask(joined: Joined, request: Request, asked: Asked) -> ToProcess:
    """``request`` numbered on ``joined``'s data connection, noted until its answer."""
    seq, joined.next_seq = joined.next_seq, joined.next_seq + 1
    joined.asked[seq] = asked
    return ToProcess(joined.member.key, Request(seq, request.command, request.arguments))


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
