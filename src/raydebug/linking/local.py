"""Linking processes of this machine: each refused, or reached and its bootstrap's answer
read, in parallel; then the hub asked until it lists them.

:func:`link_pids` never raises for one process: each gets an :class:`Outcome` with the one
line to print. Which way in (:func:`injector`): ``sys.remote_exec`` for a 3.14+ target from
a 3.14+ linker (falling back when no answer comes, see :mod:`.inject`), else ptrace
(:mod:`.ptrace_call`), or gdb with ``RAYDEBUG_LINK_WITH=gdb`` (:mod:`.inject`).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, TypeVar

from ..errors import LinkPendingError, ProcessGoneError, RaydebugError
from . import inject, ptrace_call
from .target import Linker, Target, read_target, refusal, this_linker, uses_remote_exec
from .ticket import HubForAgents, Ticket

# Processes linked at once: the work is the targets' (importing raydebug, the link's start),
# so more than the CPUs can run only makes each wait longer (measured: 100 processes on 2
# CPUs, 16 at once 6.3 s in all and 0.79 s each; 4 at once 3.3 s and 0.11 s each).
PARALLEL = max(2, 2 * (os.cpu_count() or 1))
INJECTOR_VARIABLE = "RAYDEBUG_LINK_WITH"  # "gdb" to use gdb instead of raydebug's ptrace
GONE_EVERY = 1.0  # seconds between asking which of the unlisted linked processes exited


@dataclass(frozen=True)
class Outcome:
    """What became of one process: ``status`` is ``linked``, ``already`` (it was live: a
    no-op), ``skipped`` (a Ray worker of no job asked for), ``exited`` (linked, then it
    exited before the hub listed it: nothing left to link), ``pending`` (its GIL is held in
    C: a helper finishes the link later), ``refused`` (not tried, or its
    raydebug is missing), ``gone`` (no such process, or it ended meanwhile) or ``failed``;
    ``line`` says it to the user."""

    pid: int
    status: str
    line: str
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        return self.status in ("linked", "already", "skipped", "exited")


def screen(pids: Sequence[int], linker: Linker | None = None
           ) -> tuple[list[Outcome], list[Target]]:
    """The refusals that ``/proc`` shows (gone, another user's, no Python...), each an
    :class:`Outcome`, and the targets left to try: nothing asked of a hub yet."""
    linker = linker or this_linker()
    refused, left = [], []
    for pid in pids:
        target = read_target(pid)
        why = refusal(target, linker, injector_name())
        if why is None:
            left.append(target)
        else:
            refused.append(Outcome(pid, "gone" if not target.alive else "refused", why))
    return refused, left


def link_targets(targets: Sequence[Target], hub: HubForAgents,
                 identities: dict[int, dict[str, Any]] | None = None,
                 parallel: int = PARALLEL, jobs: list[str] | None = None,
                 timeout: float = ptrace_call.CALL_TIMEOUT) -> list[Outcome]:
    """Link each of ``targets`` (as :func:`screen` left them) to ``hub``, ``parallel`` at a
    time; outcomes in their order. ``identities``: what to register for a pid (a Ray
    worker's ids); ``jobs``: only a process of these Ray jobs (the others: ``skipped``);
    ``timeout``: how long one process may take to run the link's code."""
    linker = this_linker()
    identities = identities or {}

    def one(target: Target) -> Outcome:
        return link_target(target, hub, linker, identities.get(target.pid), jobs, timeout)

    if len(targets) <= 1:
        return [one(target) for target in targets]
    with ThreadPoolExecutor(max_workers=min(parallel, len(targets))) as pool:
        return list(pool.map(one, targets))


def link_pids(pids: Sequence[int], hub: HubForAgents,
              identities: dict[int, dict[str, Any]] | None = None,
              jobs: list[str] | None = None,
              timeout: float = ptrace_call.CALL_TIMEOUT) -> list[Outcome]:
    """:func:`screen` then :func:`link_targets`: refusals first, then the others' outcomes."""
    refused, left = screen(pids)
    return refused + link_targets(left, hub, identities, jobs=jobs, timeout=timeout)


def link_target(target: Target, hub: HubForAgents, linker: Linker,
                identity: dict[str, Any] | None = None,
                jobs: list[str] | None = None,
                timeout: float = ptrace_call.CALL_TIMEOUT) -> Outcome:
    """Link one process that :func:`screen` let through; never raises."""
    started = time.perf_counter()
    pid = target.pid
    owner = target.uids[1] if target.uids[1] != os.geteuid() else None
    try:
        with Ticket(hub, owner=owner, identity=identity, jobs=jobs) as ticket:
            try:
                injector(target, linker)(pid, ticket, timeout)
            except LinkPendingError:
                ticket.hand_over()
                raise
            answer = ticket.read_result()
    except ProcessGoneError as gone:
        return Outcome(pid, "gone", str(gone))
    except LinkPendingError as pending:  # its helper removes the ticket once done
        return Outcome(pid, "pending", str(pending))
    except RaydebugError as error:
        status = "gone" if not read_target(pid).alive else "failed"
        return Outcome(pid, status, str(error) if status == "failed"
                       else f"pid {pid}: it exited while being linked")
    return _outcome(target, answer, time.perf_counter() - started)


def _outcome(target: Target, answer: dict[str, Any] | None, seconds: float) -> Outcome:
    pid = target.pid
    if answer is None:
        alive = read_target(pid).alive
        return Outcome(pid, "failed" if alive else "gone",
                       f"pid {pid}: the link's bootstrap did not run in it" if alive
                       else f"pid {pid}: it exited while being linked", seconds)
    status = str(answer.get("status"))
    if status == "linked":
        return Outcome(pid, "linked", f"linked pid {pid}", seconds)
    if status == "already":
        return Outcome(pid, "already", f"pid {pid} was linked already", seconds)
    if status == "skipped":
        return Outcome(pid, "skipped", f"pid {pid}: skipped ({answer.get('why')})", seconds)
    if status == "protocol":
        return Outcome(pid, "refused", f"pid {pid}: {answer.get('why')}: install the same "
                       "raydebug version in its environment", seconds)
    if status == "own":
        return Outcome(pid, "refused", f"pid {pid}: not linked: {answer.get('why')}", seconds)
    if status == "no-raydebug":
        return Outcome(pid, "refused",
                       f"pid {pid}: raydebug cannot be imported in it (Python "
                       f"{answer.get('python')}, {answer.get('executable')}): install "
                       "raydebug in its environment, or start it under `raydebug run` "
                       "next time", seconds)
    return Outcome(pid, "failed", f"pid {pid}: the link failed in it ({answer.get('why')})",
                   seconds)


Inject = Callable[[int, Ticket, float], None]  # pid, its ticket, seconds it may take


def injector_name() -> str:
    """``gdb`` when ``RAYDEBUG_LINK_WITH=gdb`` asks for it, else ``ptrace``."""
    return "gdb" if os.environ.get(INJECTOR_VARIABLE, "").strip().lower() == "gdb" else "ptrace"


def injector(target: Target, linker: Linker) -> Inject:
    """How the bootstrap gets into ``target`` (see the module docstring)."""
    if uses_remote_exec(target, linker):
        return _with_remote_exec
    if injector_name() == "gdb":
        return lambda pid, ticket, timeout: inject.run_with_gdb(pid, ticket.injected_code(),
                                                                timeout)
    return _with_ptrace


def _with_ptrace(pid: int, ticket: Ticket, timeout: float) -> None:
    ptrace_call.run_python(pid, ticket.injected_code(), timeout, then_remove=ticket.directory)


def _with_remote_exec(pid: int, ticket: Ticket, timeout: float) -> None:
    """``sys.remote_exec``, then ptrace if the bootstrap has not answered in time (a main
    thread blocked in C runs no Python: docs/design.md#linking). Untested: no 3.14 here."""
    inject.run_with_remote_exec(pid, ticket.boot)
    deadline = time.monotonic() + inject.REMOTE_EXEC_WAIT
    while time.monotonic() < deadline:
        if ticket.read_result() is not None:
            return
        time.sleep(0.01)
    if not ticket.ticket.exists():  # it ran (the ticket is gone) but wrote no result yet
        return
    ptrace_call.run_python(pid, ticket.injected_code(), timeout, then_remove=ticket.directory)


K = TypeVar("K")  # what names a process: its pid, or (node, pid) on a cluster


def wait_listed(pids: Sequence[K], listed: Callable[[], set[K]], timeout: float,
                gone: Callable[[set[K]], set[K]] | None = None) -> set[K]:
    """Ask ``listed()`` (the pids of this host the hub lists) until every one of ``pids``
    is there, or has exited (``gone(unlisted)``: those of them that have, asked every
    :data:`GONE_EVERY` s), or ``timeout`` seconds have passed; returns those listed. The
    hub learns of a process when its link thread registers, a moment after the bootstrap
    returns; a process that exits first (a Ray worker its raylet ends as idle) never is."""
    deadline = time.monotonic() + timeout
    wanted = set(pids)
    delay = 0.02
    asked_gone = time.monotonic()
    while True:
        found = listed() & wanted
        if found == wanted or time.monotonic() >= deadline:
            return found
        if gone is not None and time.monotonic() - asked_gone >= GONE_EVERY:
            wanted -= gone(wanted - found)
            asked_gone = time.monotonic()
            if found == wanted:
                return found
        time.sleep(min(delay, max(0.0, deadline - time.monotonic())))
        delay = min(delay * 2, 0.5)


def exited_line(pid: int) -> str:
    """What ``link`` says of a process it linked that exited before the hub listed it."""
    return f"linked pid {pid}, then it exited before the hub listed it"
