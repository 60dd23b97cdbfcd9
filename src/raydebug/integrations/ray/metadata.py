"""Who this process is in the Ray cluster: the identities its sessions carry.

Theory of operation. A Ray worker or driver reads its task's identities (job, task, actor,
node, worker ids, the attempt) from Ray's runtime context at the moment it pauses. A fork
child of one inherits a Ray connection that no longer works after ``fork()``: from then on
it is not "in Ray" (:func:`in_ray_worker` is False) and says who started it instead (see
:mod:`.children`).
"""

from __future__ import annotations

import os
from types import FrameType
from typing import Any

import ray

_ray_usable = True  # False in a fork child: the inherited Ray connection does not work


def _forget_ray() -> None:
    global _ray_usable
    _ray_usable = False


os.register_at_fork(after_in_child=_forget_ray)


def in_ray_worker() -> bool:
    """A Ray worker or driver whose connection to Ray works (not a fork child of one)."""
    return _ray_usable and bool(ray.is_initialized())


def session_fields(frame: FrameType | None = None) -> dict[str, Any]:
    """Ray's identities of the current task, for the session record (None where n/a)."""
    context = ray.get_runtime_context()
    worker = ray._private.worker.global_worker
    task_id = _safe(context.get_task_id)
    fields: dict[str, Any] = {
        "job_id": _safe(context.get_job_id),
        "task_id": task_id,
        "task_name": _safe(context.get_task_name),
        "actor_id": _safe(context.get_actor_id),
        "actor_class": None,
        "node_id": _safe(context.get_node_id),
        "node_ip": _safe(node_ip),
        "worker_id": _safe(context.get_worker_id),
        "attempt": _safe(worker.core_worker.get_current_task_attempt_number)  # type: ignore[attr-defined]
        if task_id is not None else None,
        "remote_root": working_dir_root(),
    }
    if fields["actor_id"] and fields["task_name"] and "." in fields["task_name"]:
        fields["actor_class"] = fields["task_name"].split(".", 1)[0]
    return fields


def working_dir_root() -> str | None:
    """Where Ray unpacked the job's ``working_dir`` on this node, if the worker runs in it:
    the remote side of a path mapping to the user's local checkout."""
    cwd = os.getcwd()
    marker = os.sep + "working_dir_files" + os.sep
    if marker in cwd + os.sep:
        return cwd
    return None


def node_ip() -> str:
    """This node's address as the connected Ray worker sees it."""
    return str(ray.util.get_node_ip_address())  # type: ignore[no-untyped-call]


def _safe(getter: Any) -> Any:
    try:
        value = getter()
    except Exception:
        return None
    return None if value in ("", "nil") else value
