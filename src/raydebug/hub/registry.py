"""The hub's one place for state: connected processes, their sessions, who is attached.

Every state change goes through :func:`raydebug.session.next_state` (sessions) and
:func:`raydebug.session.next_process_state` (processes: running, paused, gone). Waiters
(:meth:`Registry.wait_for_waiting`) are woken by an :class:`asyncio.Condition`, never by
polling. A session belongs to a process; pydevd is per process, so attaching binds a client
to the process and marks all its sessions attached.
"""

from __future__ import annotations

import asyncio
import functools
import hashlib
import itertools
import json
import os
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ..errors import HubFullError, SessionBusyError, SessionNotFoundError
from ..protocol.control import ControlMessage
from ..session import (
    PausedThread,
    ProcessEvent,
    ProcessState,
    SessionEvent,
    SessionState,
    next_process_state,
    next_state,
)

# The fields of a process record that the process itself reports (see protocol Register).
REPORTED_FIELDS = ("pid", "host", "argv", "labels", "since", "job_id", "node_id", "node_ip",
                   "worker_id", "actor_class", "task_name")
# What an answer about what a process runs now may change; the rest of a record is fixed
# from its registration on, so a listing encodes it once (Process.static_json).
ACTIVITY_FIELDS = ("task_name", "actor_class")
# A listing's argv: the words while they fit in this many characters (a Ray worker's argv
# is ~1.2 KB of flags: 12 MB for 10,000 records). ``?argv=1`` gives it whole.
LISTED_ARGV_CHARS = 160


@dataclass
class HubSession:
    record: PausedThread
    process: Process
    state: SessionState = SessionState.WAITING
    attaches: int = 0  # how many clients have attached to it so far

    def to_dict(self) -> dict[str, Any]:
        return {**self.record.to_dict(), "state": self.state.value,
                "process": self.process.id, "peer": self.process.peer}

    def to_json(self) -> str:
        """``json.dumps(self.to_dict())``, character for character: the record (frozen)
        is encoded once, the three fields that can change are appended at each call."""
        return (f'{self._record_json[:-1]}, "state": "{self.state.value}", '
                f'"process": {json.dumps(self.process.id)}, '
                f'"peer": {json.dumps(self.process.peer)}}}')

    @functools.cached_property
    def _record_json(self) -> str:
        return json.dumps(self.record.to_dict())


@dataclass(eq=False)
class Process:
    """A debugged process, alive as long as its control connection."""

    id: str
    info: dict[str, Any]
    peer: str
    send: Callable[[ControlMessage | bytes], None]  # bytes: a message encoded already
    sessions: dict[str, HubSession] = field(default_factory=dict)
    client: object | None = None  # the ClientConnection attached to it, if any
    on_lost: list[Callable[[], None]] = field(default_factory=list)
    # Told of sessions that start or end while a client is attached (the client is told).
    on_session_started: list[Callable[[HubSession], None]] = field(default_factory=list)
    on_session_ended: list[Callable[[HubSession, str, str], None]] = field(
        default_factory=list)  # (session, reason, returned)
    state: ProcessState = ProcessState.RUNNING
    live: bool = False  # registered (Register): linked from its start
    record: dict[str, Any] = field(default_factory=dict)  # what Register said
    now: dict[str, Any] = field(default_factory=dict)  # what it ran when last asked
    # Asked what it runs now by the latest listing, it has not answered yet (``now`` is
    # an earlier answer, or empty).
    now_stale: bool = False
    asked_at: float = 0.0  # (loop time) when a listing last asked it what it runs now
    connected_at: float = field(default_factory=time.time)
    # The encoded fixed part of its record, by argv kind (None: not encoded yet; cleared
    # when it registers).
    static_json: dict[bool, bytes] = field(default_factory=dict)
    # Threads asked to pause that have not stopped: {"threads": n, "since": epoch seconds
    # the oldest was asked}, as its agent said last (None: none).
    pause_requested: dict[str, Any] | None = None

    def reported(self, name: str) -> Any:
        """A field the process reported: what it runs now first, then its registration,
        then its Identify."""
        value = self.now.get(name)  # (written out: a listing asks 20,000 times)
        if value is None:
            value = self.record.get(name)
            if value is None:
                value = self.info.get(name)
        return value


# One encoder for all (``json.dumps`` with separators builds a new one at each call).
_encode = json.JSONEncoder(separators=(",", ":")).encode


@functools.lru_cache(maxsize=4096)
def _changing_json(state: str, stale: bool, task_name: str | None, actor_class: str | None,
                   parent: str | None, sessions: tuple[str, ...]) -> bytes:
    """``"sessions":...}``: the fields of a listed record that change, closing the object
    :meth:`Registry._static_json` opened. These few values repeat across thousands of
    processes (one task name for most of a job, no sessions, no parent), so each
    combination is encoded once. Written out by hand: ``json.dumps`` of a small dict
    costs more than all of this."""
    return (f'"sessions":{_encode(list(sessions))},"parent":{_encode(parent)},'
            f'"state":"{state}","activity_stale":{"true" if stale else "false"},'
            f'"task_name":{_encode(task_name)},"actor_class":{_encode(actor_class)}}}'
            ).encode()


def listed_argv(argv: list[str], limit: int = LISTED_ARGV_CHARS) -> list[str]:
    """``argv``'s first words while they fit in ``limit`` characters (at least the first,
    cut to ``limit``), then ``"…"`` when any were left out: the program and its script
    stay readable, a Ray worker's kilobyte of flags does not fill a listing."""
    kept: list[str] = []
    used = 0
    for word in argv:
        if used + len(word) > limit:
            if not kept:
                kept.append(word[:limit])
            kept.append("…")
            break
        kept.append(word)
        used += len(word) + 1
    return kept


class Registry:
    def __init__(self, max_sessions: int = 10_000) -> None:
        self.max_sessions = max_sessions
        self._processes: dict[str, Process] = {}
        self._sessions: dict[str, HubSession] = {}
        self._changed = asyncio.Condition()
        # Counts every change of processes or sessions: a listing says which version it
        # shows, and a long-poll waits for a later one (``wait_for_version_after``).
        self.version = 0
        self._process_ids = itertools.count(1)
        self._by_pid: dict[tuple[str, int], Process] = {}  # (host, pid) of live processes
        self.registered_total = 0

    # -- processes --------------------------------------------------------------------------

    def add_process(self, info: dict[str, Any], peer: str,
                    send: Callable[[ControlMessage | bytes], None]) -> Process:
        process = Process(id=self._process_id(info), info=info, peer=peer, send=send)
        self._processes[process.id] = process
        return process

    def _process_id(self, info: dict[str, Any]) -> str:
        """``p`` and 8 hex digits of its host and pid: the same process has the same id
        after a hub restart (a script that kept it still names it); a number is appended in
        the unlikely case that the digits of two live processes collide."""
        digest = hashlib.blake2b(f"{info.get('host')}\0{info.get('pid')}".encode(),
                                 digest_size=4).hexdigest()
        candidate = f"p{digest}"
        while candidate in self._processes:
            candidate = f"p{digest}-{next(self._process_ids)}"
        return candidate

    async def register_process(self, process: Process, record: dict[str, Any]) -> None:
        """A live process says what it is (``Register``); listed from now on as such.

        The hub's own process (the Ray hub actor's worker, which the job's setup hook links
        too) is never listed nor asked: pausing it would stop the hub."""
        process.record = dict(record)
        process.live = True
        process.static_json.clear()
        process.static_json[False] = self._static_json(process, False)  # for the listings
        if (record.get("host"), record.get("pid")) == (socket.gethostname(), os.getpid()):
            self._processes.pop(process.id, None)
            return
        host, pid = record.get("host"), record.get("pid")
        if isinstance(host, str) and isinstance(pid, int):
            self._by_pid[(host, pid)] = process
        await self._notify()

    async def remove_process(self, process: Process) -> None:
        """Forget a process whose connection closed; its client is told via ``on_lost``."""
        self._processes.pop(process.id, None)
        key = (process.record.get("host"), process.record.get("pid"))
        if self._by_pid.get(key) is process:  # type: ignore[arg-type]
            del self._by_pid[key]  # type: ignore[arg-type]
        for session_id in list(process.sessions):
            self._drop_session(process, session_id)
        process.state = next_process_state(process.state, ProcessEvent.LOST)
        for callback in process.on_lost:
            callback()
        await self._notify()

    def all_processes(self) -> list[Process]:
        """Every connected process, in the order they connected."""
        return list(self._processes.values())

    def process_view(self, process: Process) -> dict[str, Any]:
        """The JSON record of ``process`` (``GET /api/processes``)."""
        view: dict[str, Any] = {"id": process.id, "state": process.state.value,
                                "sessions": list(process.sessions), "live": process.live}
        for name in REPORTED_FIELDS:
            view[name] = process.reported(name)
        view["labels"] = dict(view["labels"] or {})
        view["argv"] = list(view["argv"] or [])
        if view["since"] is None:
            view["since"] = process.connected_at
        parent_pid = process.record.get("parent_pid")
        parent = self._by_pid.get((view["host"], parent_pid)) \
            if isinstance(parent_pid, int) else None
        view["parent"] = parent.id if parent is not None and parent is not process else None
        if process.pause_requested is not None:  # as the listing: only while there is one
            view["pause_requested"] = process.pause_requested
        return view

    def processes(self) -> list[dict[str, Any]]:
        return [self.process_view(process) for process in self._processes.values()]

    def processes_json(self, processes: list[Process], full_argv: bool = False) -> bytes:
        """The JSON list of ``processes``' records, as :meth:`process_view` gives them but
        with ``argv`` bounded (:func:`listed_argv`, unless ``full_argv``) and
        ``activity_stale``: true when the process has not answered the latest listing's
        question yet (``task_name``/``actor_class`` are then its earlier answer, or null).
        Quick for a listing of 10,000: each record's fixed part is encoded once, and the
        little that changes is one of a few combinations, each encoded once."""
        parts = [b"["]
        by_pid = self._by_pid
        for process in processes:
            static = process.static_json.get(full_argv)
            if static is None:
                static = process.static_json[full_argv] = self._static_json(process, full_argv)
            record = process.record
            parent_pid, host = record.get("parent_pid"), record.get("host")
            parent = by_pid.get((host, parent_pid)) \
                if isinstance(parent_pid, int) and isinstance(host, str) else None
            parts.append(static)
            changing = _changing_json(
                process.state.value, process.now_stale, process.reported("task_name"),
                process.reported("actor_class"),
                parent.id if parent is not None and parent is not process else None,
                tuple(process.sessions) if process.sessions else ())
            if process.pause_requested is not None:  # rare: written out, the object reopened
                changing = changing[:-1] + b',"pause_requested":' + \
                    _encode(process.pause_requested).encode() + b"}"
            parts.append(changing)
            parts.append(b",")
        if processes:
            parts.pop()
        parts.append(b"]")
        return b"".join(parts)

    @staticmethod
    def _static_json(process: Process, full_argv: bool) -> bytes:
        """``{"id":...,...,`` : the fields of ``process``'s record that do not change (an
        open object, followed by the changing ones)."""
        fixed: dict[str, Any] = {"id": process.id, "live": process.live}
        for name in REPORTED_FIELDS:
            if name not in ACTIVITY_FIELDS:
                fixed[name] = process.record.get(name) if process.record.get(name) \
                    is not None else process.info.get(name)
        fixed["labels"] = dict(fixed["labels"] or {})
        argv = [str(word) for word in fixed["argv"] or []]
        fixed["argv"] = argv if full_argv else listed_argv(argv)
        if fixed["since"] is None:
            fixed["since"] = process.connected_at
        return _encode(fixed)[:-1].encode() + b","

    # -- sessions ---------------------------------------------------------------------------

    async def add_session(self, process: Process, record: PausedThread) -> None:
        """Register (or, for a re-sent id of the same process, refresh) a session.

        Raises :class:`HubFullError` when the hub is full, :class:`SessionBusyError` when
        another process already owns that id.
        """
        existing = self._sessions.get(record.id)
        if existing is not None and existing.process is not process:
            raise SessionBusyError(f"session id {record.id} is already used by another process")
        if existing is None and len(self._sessions) >= self.max_sessions:
            raise HubFullError(f"the hub holds {self.max_sessions} sessions already "
                               "(raise it with `raydebug hub --max-sessions`)",
                               session_id=record.id, max_sessions=self.max_sessions)
        session = HubSession(record, process)
        if process.client is not None:
            session.state = next_state(session.state, SessionEvent.CLIENT_ATTACHED)
        process.sessions[record.id] = session
        self._sessions[record.id] = session
        process.state = next_process_state(process.state, ProcessEvent.SESSION_STARTED)
        if existing is None:
            self.registered_total += 1
            for started in list(process.on_session_started):
                started(session)
        await self._notify()

    async def end_session(self, process: Process, session_id: str, reason: str = "",
                          returned: str = "") -> None:
        """The agent says a session ended (``reason``: see ``protocol.control.END_REASONS``)."""
        if session_id in process.sessions:
            session = process.sessions[session_id]
            self._drop_session(process, session_id)
            for ended in list(process.on_session_ended):
                ended(session, reason, returned)
            await self._notify()

    def _drop_session(self, process: Process, session_id: str) -> None:
        session = process.sessions.pop(session_id)
        session.state = next_state(session.state, SessionEvent.ENDED)
        self._sessions.pop(session_id, None)
        if not process.sessions:
            process.state = next_process_state(process.state,
                                               ProcessEvent.LAST_SESSION_ENDED)

    def get(self, session_id: str) -> HubSession:
        """Raises :class:`SessionNotFoundError` naming the sessions that exist."""
        try:
            return self._sessions[session_id]
        except KeyError:
            known = ", ".join(sorted(self._sessions)) or "none"
            raise SessionNotFoundError(
                f"no session {session_id!r} on this hub (sessions: {known})") from None

    def oldest_waiting(self) -> HubSession | None:
        waiting = [s for s in self._sessions.values() if s.state is SessionState.WAITING]
        return min(waiting, key=lambda s: s.record.since, default=None)

    async def wait_for_waiting(self) -> HubSession:
        """Return the oldest waiting session, waiting for one to appear (cancellable)."""
        async with self._changed:
            while True:
                session = self.oldest_waiting()
                if session is not None:
                    return session
                await self._changed.wait()

    def all_sessions(self) -> list[HubSession]:
        """Every session, oldest first."""
        return sorted(self._sessions.values(), key=lambda s: s.record.since)

    async def wait_for_change(self) -> None:
        """Return at the next change of any session or process (cancellable)."""
        async with self._changed:
            await self._changed.wait()

    async def wait_for_count(self, minimum: int = 0, maximum: int | None = None,
                             state: SessionState | None = None) -> None:
        """Return once at least ``minimum`` and at most ``maximum`` sessions (in ``state``,
        when given) exist."""
        def reached() -> bool:
            count = sum(1 for s in self._sessions.values() if state in (None, s.state))
            return count >= minimum and (maximum is None or count <= maximum)

        async with self._changed:
            await self._changed.wait_for(reached)

    # -- attachment -------------------------------------------------------------------------

    async def attach(self, session: HubSession, client: object) -> None:
        """Bind ``client`` to the session's process; raises :class:`SessionBusyError`."""
        process = session.process
        if process.client is not None:
            raise SessionBusyError(
                f"session {session.record.id} (pid {session.record.pid}) is already being "
                "debugged by another client; detach that one first")
        if process.id not in self._processes:
            raise SessionNotFoundError(f"session {session.record.id} has ended")
        process.client = client
        for each in process.sessions.values():
            each.state = next_state(each.state, SessionEvent.CLIENT_ATTACHED)
            each.attaches += 1
        await self._notify()

    async def detach(self, process: Process, client: object) -> None:
        if process.client is not client:
            return
        process.client = None
        for each in process.sessions.values():
            each.state = next_state(each.state, SessionEvent.CLIENT_DETACHED)
        await self._notify()

    # -- views ------------------------------------------------------------------------------

    def sessions(self, state: SessionState | None = None) -> list[dict[str, Any]]:
        """Every session (in ``state``, when given) as JSON-ready dicts, oldest first."""
        return [s.to_dict() for s in self.all_sessions() if state in (None, s.state)]

    def sessions_json(self, state: SessionState | None = None) -> bytes:
        """:meth:`sessions` as a JSON array, one session per line (as ``raydebug list
        --json`` prints it, so the command passes it on). Each record is encoded once
        (1,000 sessions: ~1 ms, not ~45 for building and encoding the dicts)."""
        listed = [s.to_json() for s in self.all_sessions() if state in (None, s.state)]
        return ("[\n" + ",\n".join(listed) + "\n]" if listed else "[]").encode()

    def statistics(self) -> dict[str, int]:
        return {
            "processes": len(self._processes),
            "live_processes": sum(1 for p in self._processes.values() if p.live),
            "sessions": len(self._sessions),
            "attached": sum(1 for p in self._processes.values() if p.client is not None),
            "registered_total": self.registered_total,
        }

    async def wait_for_version_after(self, version: int) -> None:
        """Return once a process or session changed after ``version`` (at once if one
        already did); the caller bounds the wait."""
        async with self._changed:
            await self._changed.wait_for(lambda: self.version > version)

    async def _notify(self) -> None:
        async with self._changed:
            self.version += 1
            self._changed.notify_all()
