"""A group session's ids: every process's DAP ids, made unique for one client, both ways.

Theory of operation. In a group session one client sees the threads of many processes, and
each process's debugger (pydevd) numbers its ``threadId``, ``frameId``, ``variablesReference``
and ``sourceReference`` by itself, from 1: the same number means different things in two
processes. :class:`GroupIds` gives the client ids of its own and maps each back to a
:class:`LocalId` (the process's key, its id, the thread it belongs to). The same process id
maps to the same client id for as long as it lives, so a repeated ``threads`` or
``stackTrace`` gives the client the ids it knows.

Two counters, both in DAP's open interval (0, 2^31) ("Lifetime of Objects References" in the
DAP overview): thread ids count from 1 (a terminal's ``thread 3`` stays short), and *object
references* (frames, variables and sources in one table, so that a frame's id sent as a
``variablesReference`` is told apart) count from 1 too. An id the map does not hold raises
:class:`~raydebug.errors.UnknownIdError`; it is never guessed, and never routed elsewhere.

When ids die, as DAP and pydevd say:

- frames and variables live while their thread is stopped (DAP: "Once execution resumes,
  object references become invalid"): :meth:`GroupIds.resumed` drops one thread's (a step,
  a ``singleThread`` continue) or a whole process's (a continue);
- a thread id lives until its thread exits (DAP: ``threadId`` has no limited lifetime, or
  ``pause`` could not name a running thread): :meth:`GroupIds.thread_exited`;
- sources live as long as the process (pydevd keeps its ``sourceReference`` table for the
  connection);
- a process that leaves takes all of its ids with it (:meth:`GroupIds.left`): a later request
  naming one is answered with an error, never sent to another process.

Memory is bounded per process: at most :data:`MAX_THREADS_PER_PROCESS` thread ids and
:data:`MAX_REFS_PER_PROCESS` object references; past that the least recently used goes (a
client that asks for it again is told it is no longer valid).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Final

from ..errors import UnknownIdError

# DAP's field names, used as the kinds of ids.
THREAD: Final = "threadId"
FRAME: Final = "frameId"
VARIABLES: Final = "variablesReference"
SOURCE: Final = "sourceReference"
REFERENCE_KINDS = (FRAME, VARIABLES, SOURCE)

LARGEST_ID = 2**31 - 1  # DAP: ids are in (0, 2^31)
MAX_THREADS_PER_PROCESS = 1024
MAX_REFS_PER_PROCESS = 4096


@dataclass(frozen=True, slots=True)
class LocalId:
    """What a client id stands for: ``local`` in the process whose key is ``process``;
    ``thread``: the process's thread it belongs to (a frame's or a variable's; a thread's is
    itself; None for a source)."""

    kind: str
    process: str
    local: int
    thread: int | None


@dataclass
class _ProcessIds:
    # Oldest (least recently used) first: the first to go past the bound.
    threads: dict[int, int] = field(default_factory=dict)  # local thread id -> client id
    refs: dict[tuple[str, int], int] = field(default_factory=dict)  # (kind, local) -> client id


class _Counter:
    """Client ids of one table, in (0, 2^31): after the largest, it starts again at 1,
    skipping the ids still in use."""

    def __init__(self) -> None:
        self.given = 0  # the last id given
        self.wrapped = False  # it went past the largest: any id may have been given

    def next(self, in_use: dict[int, LocalId]) -> int:
        candidate = self.given
        while True:
            if candidate < LARGEST_ID:
                candidate += 1
            else:
                candidate, self.wrapped = 1, True
            if candidate not in in_use:
                self.given = candidate
                return candidate


class GroupIds:
    """The client's ids of one group session and what each stands for."""

    def __init__(self, max_threads: int = MAX_THREADS_PER_PROCESS,
                 max_refs: int = MAX_REFS_PER_PROCESS) -> None:
        self._max_threads = max_threads
        self._max_refs = max_refs
        self._threads: dict[int, LocalId] = {}  # client thread id -> its process's
        self._refs: dict[int, LocalId] = {}  # client object reference -> its process's
        self._thread_counter = _Counter()
        self._ref_counter = _Counter()
        self._processes: dict[str, _ProcessIds] = {}
        self.evicted = 0  # ids dropped by the bound, not by their lifetime

    # -- process -> client ------------------------------------------------------------------

    def thread_to_client(self, process: str, local: int) -> int:
        """The client's id for thread ``local`` of ``process`` (the same one each time)."""
        ids = self._processes.setdefault(process, _ProcessIds())
        client = ids.threads.get(local)
        if client is not None:
            return client
        if len(ids.threads) >= self._max_threads:
            oldest = next(iter(ids.threads))
            del self._threads[ids.threads.pop(oldest)]
            self.evicted += 1
        client = self._thread_counter.next(self._threads)
        ids.threads[local] = client
        self._threads[client] = LocalId(THREAD, process, local, local)
        return client

    def ref_to_client(self, kind: str, process: str, local: int, thread: int | None) -> int:
        """The client's id for object reference ``local`` (a ``kind`` of
        :data:`REFERENCE_KINDS`) of ``process``, belonging to ``thread``. 0 (DAP: no
        reference) stays 0."""
        if local == 0:
            return 0
        ids = self._processes.setdefault(process, _ProcessIds())
        key = (kind, local)
        client = ids.refs.pop(key, None)
        if client is None:
            if len(ids.refs) >= self._max_refs:
                del self._refs[ids.refs.pop(next(iter(ids.refs)))]
                self.evicted += 1
            client = self._ref_counter.next(self._refs)
            self._refs[client] = LocalId(kind, process, local, thread)
        ids.refs[key] = client  # (re)inserted last: the most recently used
        return client

    # -- client -> process ------------------------------------------------------------------

    def to_local(self, kind: str, client_id: object) -> LocalId:
        """What the client's ``client_id`` of ``kind`` stands for. Raises
        :class:`~raydebug.errors.UnknownIdError` when it is not an id this session holds
        for that kind (not a number, never given, or dropped since)."""
        table, counter = ((self._threads, self._thread_counter) if kind == THREAD
                          else (self._refs, self._ref_counter))
        if not isinstance(client_id, int) or isinstance(client_id, bool):
            raise UnknownIdError(kind, client_id, f"{kind} {client_id!r} is not a number")
        found = table.get(client_id)
        if found is not None and found.kind == kind:
            return found
        if found is not None:
            why = f"is a {found.kind}, not a {kind}"
        elif 0 < client_id <= LARGEST_ID and (client_id <= counter.given or counter.wrapped):
            why = ("is no longer valid: frames and variables live while their thread is "
                   "stopped, and a process's ids go when it leaves the group")
        else:
            why = "was never given in this group session"
        raise UnknownIdError(kind, client_id, f"{kind} {client_id} {why}")

    # -- when ids die -------------------------------------------------------------------------

    def resumed(self, process: str, thread: int | None = None) -> None:
        """``thread`` of ``process`` ran on (None: every thread of it): its frames and
        variables are no longer valid. Sources and thread ids stay."""
        ids = self._processes.get(process)
        if ids is None:
            return
        dead = [key for key, client in ids.refs.items() if key[0] != SOURCE
                and (thread is None or self._refs[client].thread == thread)]
        for key in dead:
            del self._refs[ids.refs.pop(key)]

    def thread_exited(self, process: str, local: int) -> int | None:
        """Thread ``local`` of ``process`` has exited: drop its id and its references.
        Returns the client's id it had (None: the client never had one)."""
        ids = self._processes.get(process)
        client = ids.threads.pop(local, None) if ids is not None else None
        if client is None:
            return None
        del self._threads[client]
        self.resumed(process, local)
        return client

    def left(self, process: str) -> list[int]:
        """``process`` left the group: drop every id of it. Returns the client's ids of its
        threads (the client is told they exited)."""
        ids = self._processes.pop(process, None)
        if ids is None:
            return []
        for client in ids.refs.values():
            del self._refs[client]
        for client in ids.threads.values():
            del self._threads[client]
        return list(ids.threads.values())

    def threads_of(self, process: str) -> dict[int, int]:
        """``process``'s threads the client has ids for: local id -> client id."""
        ids = self._processes.get(process)
        return dict(ids.threads) if ids is not None else {}

    def statistics(self) -> dict[str, int]:
        """How many ids are held now, in all, and how many the bound has dropped."""
        return {"processes": len(self._processes), "threads": len(self._threads),
                "references": len(self._refs), "evicted": self.evicted}
