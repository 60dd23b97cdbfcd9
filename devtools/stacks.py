"""Stacks as the hub's ``/api/stacks`` gives them, written by hand for the in-memory tests of
what merges and renders them."""

from __future__ import annotations

from typing import Any

JOB = "/srv/job.py"


def frame(function: str, line: int, code: str = "", file: str = JOB,
          **local_values: str) -> dict[str, Any]:
    """One frame of a thread's stack; ``local_values`` are its locals (name -> repr)."""
    found: dict[str, Any] = {"file": file, "line": line, "function": function, "code": code}
    if local_values:
        found["locals"] = local_values
    return found


def process(rank: int | None, *stacks: list[dict[str, Any]], pid: int | None = None,
            answered: bool = True, reason: str | None = None) -> dict[str, Any]:
    """One entry of /api/stacks: a process whose threads have these stacks."""
    pid = pid if pid is not None else 1000 + (rank or 0)
    labels = {"RANK": str(rank)} if rank is not None else {}
    return {"process": {"id": f"p{pid}", "pid": pid, "host": "node-1", "labels": labels},
            "answered": answered, "reason": reason,
            "threads": [{"id": 100 + i, "name": "MainThread" if i == 0 else f"Thread-{i}",
                         "daemon": i > 0, "frames": frames}
                        for i, frames in enumerate(stacks)]}
