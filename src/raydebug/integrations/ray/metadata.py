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

# The process whose Ray connection works: a fork child's does not. A pid, not a flag cleared
# at fork: other at-fork hooks (the agent's, starting a fork child's live link) may ask
# before an at-fork hook of this module would have run.
_ray_pid = os.getpid()


def in_ray_worker() -> bool:
    """A Ray worker or driver whose connection to Ray works (not a fork child of one)."""
    return os.getpid() == _ray_pid and bool(ray.is_initialized())


def left_ray() -> bool:
    """A Ray worker or driver that is no longer connected (``ray.shutdown()``, or its
    cluster stopped); not a fork child of one."""
    return os.getpid() == _ray_pid and not ray.is_initialized()


IDLE_TITLES = ("IDLE", "IDLE_SPILL_WORKER", "IDLE_RESTORE_WORKER")


def current_activity() -> dict[str, Any]:
    """What this worker runs now, from its process title (``ray::<task>`` or
    ``ray::<Class>.<method>``, ``ray::IDLE`` between tasks), which Ray sets around every
    task: one read of a process-wide string, safe on any thread (the runtime context's task
    is the *calling thread's*, and the link thread runs none)."""
    if not in_ray_worker():
        return {}
    title = str(ray._raylet.getproctitle())  # type: ignore[attr-defined]
    name = title[len("ray::"):].split(" ", 1)[0] if title.startswith("ray::") else ""
    worker = ray._private.worker.global_worker
    is_actor = not worker.actor_id.is_nil() if hasattr(worker, "core_worker") else False
    if is_actor:
        actor_class, dot, _method = name.partition(".")
        return {"actor_class": actor_class or None, "task_name": name if dot else None}
    return {"task_name": None if name in IDLE_TITLES or not name else name}


def live_identity() -> dict[str, Any]:
    """The ids a live Ray process registers with: job, node, worker (on the thread that
    connected to Ray: the setup hook's, the driver's)."""
    context = ray.get_runtime_context()
    return {"job_id": _safe(context.get_job_id), "node_id": _safe(context.get_node_id),
            "node_ip": _safe(node_ip), "worker_id": _safe(context.get_worker_id)}


def session_fields(frame: FrameType | None = None) -> dict[str, Any]:
    """Ray's identities of the current task, for the session record (None where n/a)."""
    context = ray.get_runtime_context()
    worker = ray._private.worker.global_worker
    # A driver runs no task, and Ray logs a warning at each ask of its task (the user's
    # driver output would carry two per session or registration).
    in_task = worker.mode == ray._private.worker.WORKER_MODE  # type: ignore[attr-defined]
    task_id = _safe(context.get_task_id) if in_task else None
    fields: dict[str, Any] = {
        "job_id": _safe(context.get_job_id),
        "task_id": task_id,
        "task_name": _safe(context.get_task_name) if in_task else None,
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
