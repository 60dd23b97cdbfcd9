"""What the registry holds: an entry per process and per session, and each one's JSON.

A :class:`Process` is a control connection: the :class:`~raydebug.process_record.ProcessRecord`
its agent sent (Identify's, then its Register's), what it runs now, its sessions and its
client. A :class:`HubSession` is one :class:`~raydebug.session.PausedThread` and its state.
Their JSON is what ``GET /api/processes`` and ``GET /api/sessions`` (``raydebug ps --json``,
``raydebug list --json``) return. A listing of 10,000 processes is quick: each process's
fixed fields are encoded once, and the few values that change repeat across processes, so
each combination of them is encoded once.
"""

from __future__ import annotations

import functools
import json
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ..process_record import ProcessRecord
from ..protocol.control import ControlMessage
from ..session import PausedThread, ProcessState, SessionState

# The fields of a process's record that a listing shows.
LISTED_FIELDS = ("pid", "host", "argv", "labels", "since", "job_id", "node_id", "node_ip",
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
    record: ProcessRecord  # Identify's, replaced by each Register's
    peer: str
    send: Callable[[ControlMessage | bytes], None]  # bytes: a message encoded already
    sessions: dict[str, HubSession] = field(default_factory=dict)
    client: object | None = None  # the ClientHandler attached to it, if any
    on_lost: list[Callable[[], None]] = field(default_factory=list)
    # Told of sessions that start or end while a client is attached (the client is told).
    on_session_started: list[Callable[[HubSession], None]] = field(default_factory=list)
    on_session_ended: list[Callable[[HubSession, str, str], None]] = field(
        default_factory=list)  # (session, reason, returned)
    state: ProcessState = ProcessState.RUNNING
    live: bool = False  # registered (Register): linked from its start
    now: dict[str, Any] = field(default_factory=dict)  # what it ran when last asked
    # Asked what it runs now by the latest listing, it has not answered yet (``now`` is
    # an earlier answer, or empty).
    now_stale: bool = False
    asked_at: float = 0.0  # (loop time) when a listing last asked it what it runs now
    connected_at: float = field(default_factory=time.time)
    # The encoded fixed part of its listed JSON, by argv kind (None: not encoded yet;
    # cleared when it registers).
    static_json: dict[bool, bytes] = field(default_factory=dict)
    # Threads asked to pause that have not stopped: {"threads": n, "since": epoch seconds
    # the oldest was asked}, as its agent said last (None: none).
    pause_requested: dict[str, Any] | None = None

    def reported(self, name: str) -> Any:
        """A field of its record (a :class:`ProcessRecord` field's name), what it runs now
        first."""
        value = self.now.get(name)  # (written out: a listing asks 20,000 times)
        return getattr(self.record, name) if value is None else value

    def view(self, parent: str | None) -> dict[str, Any]:
        """Its JSON record as ``GET /api/processes`` lists it, with whole ``argv`` and no
        ``activity_stale``; ``parent``: the id of the process that started it, if linked."""
        view: dict[str, Any] = {"id": self.id, "state": self.state.value,
                                "sessions": list(self.sessions), "live": self.live}
        for name in LISTED_FIELDS:
            view[name] = self.reported(name)
        view["labels"] = dict(view["labels"])
        view["argv"] = list(view["argv"])
        if view["since"] is None:
            view["since"] = self.connected_at
        view["parent"] = parent
        if self.pause_requested is not None:  # as the listing: only while there is one
            view["pause_requested"] = self.pause_requested
        return view

    def fixed_json(self, full_argv: bool) -> bytes:
        """``{"id":...,...,`` : the fields of its record that do not change (an open
        object, followed by the changing ones), encoded once (until it registers again)."""
        cached = self.static_json.get(full_argv)
        if cached is not None:
            return cached
        fixed: dict[str, Any] = {"id": self.id, "live": self.live}
        for name in LISTED_FIELDS:
            if name not in ACTIVITY_FIELDS:
                fixed[name] = getattr(self.record, name)
        fixed["labels"] = dict(fixed["labels"])
        argv = [str(word) for word in fixed["argv"]]
        fixed["argv"] = argv if full_argv else listed_argv(argv)
        if fixed["since"] is None:
            fixed["since"] = self.connected_at
        encoded = self.static_json[full_argv] = _encode(fixed)[:-1].encode() + b","
        return encoded


def listing_json(processes: Iterable[Process], linked: Mapping[tuple[str, int], Process],
                 full_argv: bool = False) -> bytes:
    """The JSON list of ``processes``' records, each as :meth:`Process.view` gives it
    (``linked``: the linked processes by host and pid, where a ``parent`` is found) but with
    ``argv`` bounded (:func:`listed_argv`, unless ``full_argv``) and ``activity_stale``: true
    when the process has not answered the latest listing's question yet
    (``task_name``/``actor_class`` are then its earlier answer, or null). Written as one
    loop: it runs 10,000 times a listing."""
    parts = [b"["]
    for process in processes:
        static = process.static_json.get(full_argv)
        if static is None:
            static = process.fixed_json(full_argv)
        record = process.record
        parent = linked.get((record.host, record.parent_pid)) \
            if record.parent_pid is not None else None
        changing = _changing_json(
            process.state.value, process.now_stale, process.reported("task_name"),
            process.reported("actor_class"),
            parent.id if parent is not None and parent is not process else None,
            tuple(process.sessions) if process.sessions else ())
        if process.pause_requested is not None:  # rare: written out, the object reopened
            changing = changing[:-1] + b',"pause_requested":' + \
                _encode(process.pause_requested).encode() + b"}"
        parts += (static, changing, b",")
    if len(parts) > 1:
        parts.pop()
    parts.append(b"]")
    return b"".join(parts)


# One encoder for all (``json.dumps`` with separators builds a new one at each call).
_encode = json.JSONEncoder(separators=(",", ":")).encode


@functools.lru_cache(maxsize=4096)
def _changing_json(state: str, stale: bool, task_name: str | None, actor_class: str | None,
                   parent: str | None, sessions: tuple[str, ...]) -> bytes:
    """``"sessions":...}``: the fields of a listed record that change, closing the object
    :meth:`Process.fixed_json` opened. Written out by hand: ``json.dumps`` of a small
    dict costs more than all of this."""
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
