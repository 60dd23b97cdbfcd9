"""What a session and a process are, and the one table of how each one's state changes.

Theory of operation. A *session* is one pause of one thread: a ``breakpoint()``, an
uncaught exception (post-mortem), or ``raydebug pause`` (reason ``pause``). The agent
inside the process creates it and ends it; the hub lists it and routes debuggers to it.
pydevd is per process, so a DAP client that attaches to a session is attached to its whole
process: every session of that process is ``attached`` while that client stays.

    waiting  --client attached-->  attached
    attached --client detached-->  waiting      (dropped client: the thread is still paused)
    any      --ended / lost------>  gone        (the agent ended it, or the worker died)

A thread that runs again is no event of this table (the hub does not see it): stepping and
``continue`` leave an attached session attached. The agent ends a session (``ended``, with
one of ``protocol.control.END_REASONS``) when its thread runs on with no client attached, when
no client came in time, when the function it paused in returns, or when the same thread
pauses elsewhere. A client that detaches cleanly makes pydevd resume every thread, which
ends every session of the process.
"""

from __future__ import annotations

import enum
import time
from dataclasses import dataclass, field, fields
from typing import Any

from .errors import LocalProtocolError, RemoteProtocolError


class SessionState(str, enum.Enum):
    WAITING = "waiting"
    ATTACHED = "attached"
    GONE = "gone"


class SessionEvent(enum.Enum):
    CLIENT_ATTACHED = "client attached"
    CLIENT_DETACHED = "client detached"
    ENDED = "ended"


_TRANSITIONS: dict[tuple[SessionState, SessionEvent], SessionState] = {
    (SessionState.WAITING, SessionEvent.CLIENT_ATTACHED): SessionState.ATTACHED,
    (SessionState.ATTACHED, SessionEvent.CLIENT_DETACHED): SessionState.WAITING,
    (SessionState.WAITING, SessionEvent.ENDED): SessionState.GONE,
    (SessionState.ATTACHED, SessionEvent.ENDED): SessionState.GONE,
}


def next_state(state: SessionState, event: SessionEvent) -> SessionState:
    """Return the state after ``event``; raises :class:`LocalProtocolError` if illegal."""
    try:
        return _TRANSITIONS[(state, event)]
    except KeyError:
        raise LocalProtocolError(f"a {state.value} session cannot be {event.value}") from None


REASON_BREAKPOINT = "breakpoint"
REASON_EXCEPTION = "exception"
REASON_PAUSE = "pause"  # raydebug pause: every Python thread of a live process
REASONS = (REASON_BREAKPOINT, REASON_EXCEPTION, REASON_PAUSE)
# What a session whose thread a pause found blocked in C (``PausedThread.blocked_in_c``)
# lets a user do, as the terminal says it in one line (the web page has the same words).
BLOCKED_IN_C = ("blocked in C: its frames, locals and evaluate work now; it steps once the "
                "call returns, and stops at its next line (evaluate what unblocks it, or "
                "continue)")


# A *process* is one control connection: a live process (linked from its start) or one that
# linked at its first pause. Its state follows its sessions; it never comes back from gone
# (a process that reconnects is a new record, found again by pid and host).
#
#     running --session started-->   paused
#     paused  --last session ended--> running
#     any     --lost----------------> gone      (its control connection closed)
#
# A session that starts in a paused process, or one that ends while others remain, changes
# nothing.

class ProcessState(str, enum.Enum):
    RUNNING = "running"
    PAUSED = "paused"
    GONE = "gone"


class ProcessEvent(enum.Enum):
    SESSION_STARTED = "session started"
    LAST_SESSION_ENDED = "last session ended"
    LOST = "lost"


_PROCESS_TRANSITIONS: dict[tuple[ProcessState, ProcessEvent], ProcessState] = {
    (ProcessState.RUNNING, ProcessEvent.SESSION_STARTED): ProcessState.PAUSED,
    (ProcessState.PAUSED, ProcessEvent.SESSION_STARTED): ProcessState.PAUSED,
    (ProcessState.PAUSED, ProcessEvent.LAST_SESSION_ENDED): ProcessState.RUNNING,
    (ProcessState.RUNNING, ProcessEvent.LOST): ProcessState.GONE,
    (ProcessState.PAUSED, ProcessEvent.LOST): ProcessState.GONE,
}


def next_process_state(state: ProcessState, event: ProcessEvent) -> ProcessState:
    """Return a process's state after ``event``; raises :class:`LocalProtocolError`."""
    try:
        return _PROCESS_TRANSITIONS[(state, event)]
    except KeyError:
        raise LocalProtocolError(f"a {state.value} process cannot be {event.value}") from None


# A *pause request* is one thread that ``raydebug pause`` (or a DAP ``pause``) asked to stop,
# until it has. Its owner is the agent of that process; it always ends:
#
#     asked   --thread stopped----->  stopped     (a session, reason "pause", where it stopped)
#     asked   --reported blocked--->  blocked     (listed anyway: the thread is still in C)
#     blocked --thread stopped----->  stopped     (it returned to Python and stopped there)
#     asked   --cancelled---------->  cancelled   (`pause --cancel`, a resume of every thread)
#     blocked --cancelled---------->  cancelled
#     asked   --expired------------>  expired     (nothing stopped within the asker's wait)
#
# stopped, cancelled and expired are final: a thread whose request ended runs on untraced
# when it returns to Python, unless it is asked again (a new request).

class PauseRequestState(str, enum.Enum):
    ASKED = "asked"
    BLOCKED = "blocked"
    STOPPED = "stopped"
    CANCELLED = "cancelled"
    EXPIRED = "expired"


class PauseRequestEvent(enum.Enum):
    THREAD_STOPPED = "thread stopped"
    REPORTED_BLOCKED = "reported blocked"
    CANCELLED = "cancelled"
    EXPIRED = "expired"


_PAUSE_REQUEST_TRANSITIONS: dict[tuple[PauseRequestState, PauseRequestEvent],
                                 PauseRequestState] = {
    (PauseRequestState.ASKED, PauseRequestEvent.THREAD_STOPPED): PauseRequestState.STOPPED,
    (PauseRequestState.ASKED, PauseRequestEvent.REPORTED_BLOCKED): PauseRequestState.BLOCKED,
    (PauseRequestState.BLOCKED, PauseRequestEvent.THREAD_STOPPED): PauseRequestState.STOPPED,
    (PauseRequestState.ASKED, PauseRequestEvent.CANCELLED): PauseRequestState.CANCELLED,
    (PauseRequestState.BLOCKED, PauseRequestEvent.CANCELLED): PauseRequestState.CANCELLED,
    (PauseRequestState.ASKED, PauseRequestEvent.EXPIRED): PauseRequestState.EXPIRED,
}


def next_pause_request_state(state: PauseRequestState,
                             event: PauseRequestEvent) -> PauseRequestState:
    """Return a pause request's state after ``event``; raises :class:`LocalProtocolError`
    (e.g. a request that stopped cannot expire)."""
    try:
        return _PAUSE_REQUEST_TRANSITIONS[(state, event)]
    except KeyError:
        raise LocalProtocolError(
            f"a pause request {state.value} cannot be {event.value}") from None


RAY_TEXT_FIELDS = ("job_id", "task_id", "task_name", "actor_id", "actor_class", "node_id",
                   "node_ip", "worker_id", "remote_root")


@dataclass(frozen=True)
class PausedThread:
    """A session as the agent reported it: everything a user sees about one paused thread.

    ``to_dict``/``from_dict`` are the JSON shape of ``raydebug list --json`` and of
    ``GET /api/sessions`` (plus ``state``, which the hub adds).
    """

    id: str
    pid: int
    host: str
    file: str
    line: int
    function: str
    reason: str = REASON_BREAKPOINT
    exception: str | None = None
    source: str = ""
    thread: str = ""
    since: float = field(default_factory=time.time)
    argv: list[str] = field(default_factory=list)
    labels: dict[str, str] = field(default_factory=dict)
    # Ray's identities of the paused task (None outside Ray, or where not applicable).
    job_id: str | None = None
    task_id: str | None = None
    task_name: str | None = None
    actor_id: str | None = None
    actor_class: str | None = None
    node_id: str | None = None
    node_ip: str | None = None
    worker_id: str | None = None
    attempt: int | None = None
    # Where the code lives on the worker's node when Ray shipped it (runtime_env
    # working_dir): a client maps this to the user's local checkout.
    remote_root: str | None = None
    # Stopped by a cluster breakpoint (set in an IDE, the web page or `raydebug break`),
    # not by a breakpoint() in the code: both have reason "breakpoint".
    cluster_breakpoint: bool = False
    # A thread that ``raydebug pause`` found blocked in C (reason "pause"): its frames and
    # locals are read and evaluate runs, but it cannot step until the call returns; then it
    # stops at its next line and this becomes False.
    blocked_in_c: bool = False

    def to_dict(self) -> dict[str, Any]:
        # Not dataclasses.asdict(): its recursive deep copy was ~70% of the time the hub took
        # to list 1,000 sessions (bench/scale.py). The two containers are copied one level.
        data = {spec.name: getattr(self, spec.name) for spec in fields(self)}
        data["argv"], data["labels"] = list(self.argv), dict(self.labels)
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> PausedThread:
        """Validate a session sent by a worker; raises :class:`RemoteProtocolError`."""
        known = {spec.name for spec in fields(cls)}
        try:
            record = cls(**{key: value for key, value in data.items() if key in known})
        except TypeError as error:
            raise RemoteProtocolError(f"incomplete session record: {error}") from error
        checks = {
            "id": isinstance(record.id, str) and 0 < len(record.id) <= 64,
            "pid": isinstance(record.pid, int),
            "line": isinstance(record.line, int),
            "host": isinstance(record.host, str),
            "file": isinstance(record.file, str),
            "function": isinstance(record.function, str),
            "reason": record.reason in REASONS,
            "exception": record.exception is None or isinstance(record.exception, str),
            "since": isinstance(record.since, (int, float)),
            "argv": isinstance(record.argv, list),
            "labels": isinstance(record.labels, dict),
            "attempt": record.attempt is None or isinstance(record.attempt, int),
            "cluster_breakpoint": isinstance(record.cluster_breakpoint, bool),
            "blocked_in_c": isinstance(record.blocked_in_c, bool),
            **{name: getattr(record, name) is None or isinstance(getattr(record, name), str)
               for name in RAY_TEXT_FIELDS},
        }
        bad = [name for name, ok in checks.items() if not ok]
        if bad:
            raise RemoteProtocolError(f"invalid session record field(s): {', '.join(bad)}")
        return record
