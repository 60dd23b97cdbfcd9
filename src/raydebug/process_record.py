"""What a process says about itself: one record, built by its agent, kept and listed by the hub.

The process's counterpart of :class:`raydebug.session.PausedThread` (a session's record). The
agent builds it (:func:`raydebug.agent.link.live.process_record`); the control connection
carries it as a dict (:meth:`ProcessRecord.to_dict`): ``Identify``, on every (re)connect, the
fields of :data:`IDENTIFY_FIELDS`; ``Register`` (a live process, right after) all of them. The
hub validates what arrives (:meth:`ProcessRecord.from_dict`) and keeps the latest as its entry's
``record``; ``GET /api/processes`` lists it with what the hub adds (``id``, ``state``,
``sessions``, ``parent``, ``live``).
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass, field, fields
from typing import Any

from .errors import RemoteProtocolError

# What Identify says: who is calling, before the hub lists anything about it.
IDENTIFY_FIELDS = ("pid", "host", "argv", "python")
# Ray's identities of a Ray worker (or of the task that started a process): text or None.
RAY_FIELDS = ("job_id", "node_id", "node_ip", "worker_id", "actor_class", "task_name",
              "task_id")


@dataclass(frozen=True)
class ProcessRecord:
    """A process as its agent reported it; the fields a process leaves unsaid are None (or
    empty). Labels follow :func:`raydebug.agent.config.process_labels`."""

    pid: int
    host: str
    argv: list[str] = field(default_factory=list)
    python: str = ""  # its version, e.g. "3.11.7"
    labels: dict[str, str] = field(default_factory=dict)
    since: float | None = None  # when it started (epoch seconds); Identify does not say
    parent_pid: int | None = None  # the process that started or forked it
    job_id: str | None = None
    node_id: str | None = None
    node_ip: str | None = None
    worker_id: str | None = None
    actor_class: str | None = None  # what it ran when it registered (it changes: ask it)
    task_name: str | None = None
    task_id: str | None = None

    def to_dict(self, only: Collection[str] | None = None) -> dict[str, Any]:
        """The wire form: every field that is not None (of those named in ``only``, when
        given), ``argv`` and ``labels`` copied."""
        data = {spec.name: getattr(self, spec.name) for spec in fields(self)
                if only is None or spec.name in only}
        data = {name: value for name, value in data.items() if value is not None}
        if "argv" in data:
            data["argv"] = list(self.argv)
        if "labels" in data:
            data["labels"] = dict(self.labels)
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ProcessRecord:
        """Validate a record an agent sent (unknown fields are ignored: a newer agent's);
        raises :class:`RemoteProtocolError` naming what is missing or of the wrong type."""
        known = {spec.name for spec in fields(cls)}
        try:
            record = cls(**{key: value for key, value in data.items()
                            if key in known and value is not None})
        except TypeError as error:
            raise RemoteProtocolError(f"incomplete process record: {error}") from error
        checks = {
            "pid": isinstance(record.pid, int),
            "host": isinstance(record.host, str),
            "argv": isinstance(record.argv, list),
            "python": isinstance(record.python, str),
            "labels": isinstance(record.labels, dict),
            "since": record.since is None or isinstance(record.since, (int, float)),
            "parent_pid": record.parent_pid is None or isinstance(record.parent_pid, int),
            **{name: getattr(record, name) is None or isinstance(getattr(record, name), str)
               for name in RAY_FIELDS},
        }
        bad = [name for name, ok in checks.items() if not ok]
        if bad:
            raise RemoteProtocolError(f"invalid process record field(s): {', '.join(bad)}")
        return record
