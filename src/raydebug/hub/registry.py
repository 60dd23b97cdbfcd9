"""The hub's one place for state: connected processes, their sessions, who is attached.

Every state change goes through :func:`raydebug.session.next_state` (sessions) and
:func:`raydebug.session.next_process_state` (processes: running, paused, gone). Waiters
(:meth:`Registry.wait_for_waiting`) are woken by an :class:`asyncio.Condition`, never by
polling. A session belongs to a process; pydevd is per process, so attaching binds a client
to the process and marks all its sessions attached.
"""

from __future__ import annotations

import asyncio
import hashlib
import itertools
import os
import socket
from collections.abc import Callable
from typing import Any

from ..errors import HubFullError, SessionBusyError, SessionNotFoundError
from ..process_record import ProcessRecord
from ..protocol.control import ControlMessage
from ..session import (
    PausedThread,
    ProcessEvent,
    SessionEvent,
    SessionState,
    next_process_state,
    next_state,
)
from .entries import HubSession, Process, listing_json


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

    def add_process(self, record: ProcessRecord, peer: str,
                    send: Callable[[ControlMessage | bytes], None]) -> Process:
        """A control connection identified itself (``record``: its Identify's)."""
        process = Process(id=self._process_id(record), record=record, peer=peer, send=send)
        self._processes[process.id] = process
        return process

    def _process_id(self, record: ProcessRecord) -> str:
        """``p`` and 8 hex digits of its host and pid: the same process has the same id
        after a hub restart (a script that kept it still names it); a number is appended in
        the unlikely case that the digits of two live processes collide."""
        digest = hashlib.blake2b(f"{record.host}\0{record.pid}".encode(),
                                 digest_size=4).hexdigest()
        candidate = f"p{digest}"
        while candidate in self._processes:
            candidate = f"p{digest}-{next(self._process_ids)}"
        return candidate

    async def register_process(self, process: Process, record: ProcessRecord) -> None:
        """A live process says what it is (``Register``); listed from now on as such.

        The hub's own process (the Ray hub actor's worker, which the job's setup hook links
        too) is never listed nor asked: pausing it would stop the hub."""
        process.record = record
        process.live = True
        process.static_json.clear()
        process.fixed_json(False)  # encoded now, not by the next listing
        if (record.host, record.pid) == (socket.gethostname(), os.getpid()):
            self._processes.pop(process.id, None)
            return
        self._by_pid[(record.host, record.pid)] = process
        await self._notify()

    async def remove_process(self, process: Process) -> None:
        """Forget a process whose connection closed; its client is told via ``on_lost``."""
        self._processes.pop(process.id, None)
        key = (process.record.host, process.record.pid)
        if self._by_pid.get(key) is process:
            del self._by_pid[key]
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
        """The JSON record of ``process`` (see :meth:`Process.view`)."""
        return process.view(self._parent(process))

    def processes(self) -> list[dict[str, Any]]:
        return [self.process_view(process) for process in self._processes.values()]

    def processes_json(self, processes: list[Process], full_argv: bool = False) -> bytes:
        """The JSON list of ``processes``' records (see :func:`.entries.listing_json`)."""
        return listing_json(processes, self._by_pid, full_argv)

    def _parent(self, process: Process) -> str | None:
        """The id of the linked process that started ``process`` (same host), if any."""
        record = process.record
        parent = self._by_pid.get((record.host, record.parent_pid)) \
            if record.parent_pid is not None else None
        return parent.id if parent is not None and parent is not process else None

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
