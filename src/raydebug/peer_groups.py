"""Which processes are peers, doing the same job: what ``raydebug stacks`` compares a
process's stack with (:mod:`raydebug.stack_tree` marks a branch odd among its peers only).

A driver is not the peer of its workers, nor an idle worker of a busy one: their stacks
differ by nature. Pure: a process record of the hub's in, a name out.
"""

from __future__ import annotations

import posixpath
from collections.abc import Mapping
from typing import Any

RAY_WORKER_MAIN = "ray/_private/workers/default_worker.py"  # every Ray worker's argv[0]
RANK_LABELS = ("RANK", "rank")


def peer_group(record: Mapping[str, Any]) -> str:
    """The peers ``record``'s process is compared with (see the module docstring), named
    as a user reads it: ``task shard``, ``actor method Trainer.step``, ``idle actors
    Trainer``, ``ranks``, ``idle Ray workers``, ``driver``, else ``command job.py``
    (``processes`` without a command; ``under P`` for the children of process P); each
    with `` of job J`` when the process is in a Ray job. ``record`` is a process record
    of the hub's (``GET /api/processes``)."""
    labels = record.get("labels") or {}
    task, actor = record.get("task_name"), record.get("actor_class")
    argv = [str(word) for word in record.get("argv") or []]
    if task:
        group = f"actor method {task}" if actor else f"task {task}"
    elif actor:
        group = f"idle actors {actor}"
    elif any(key in labels for key in RANK_LABELS):
        group = "ranks"
    elif argv and argv[0].replace("\\", "/").endswith(RAY_WORKER_MAIN):
        group = "idle Ray workers"
    elif record.get("worker_id"):  # connected to Ray, and not a worker: a driver
        group = "driver"
    else:  # a program's processes: the children of one parent, or the first ones
        program = posixpath.basename(argv[0].replace("\\", "/")) if argv else ""
        parent = record.get("parent")
        group = (f"command {program}" if program else "processes") + (
            f" under {parent}" if parent else "")
    job = record.get("job_id")
    return f"{group} of job {job}" if job else group
