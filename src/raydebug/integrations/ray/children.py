"""What a Ray worker puts in the environment of the processes it starts.

Theory of operation. Children of a task (a ``multiprocessing`` fork, a DataLoader worker, a
``subprocess``) cannot ask Ray: a fork child inherits a Ray connection that does not work
after ``fork()``, and a new interpreter has none. So just before a worker starts a process
(:func:`prepare_children`, from an at-fork hook and around ``fork_exec``), it looks the hub
up (starting it if need be) and puts in its environment what the child needs:
``RAYDEBUG_CLUSTER_HUB``, ``RAYDEBUG_TOKEN_FILE`` (a 0600 file: the token itself would show
in ``ps e`` and in logs that print the environment), ``RAYDEBUG_HUB_CERT`` with TLS, and
``RAYDEBUG_RAY_TASK``: the identities of the task that started it, which the child's
sessions carry. ``PYTHONBREAKPOINT`` already names raydebug; an interpreter without raydebug
only warns at ``breakpoint()``.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import time
from typing import Any

import ray

from .metadata import in_ray_worker, session_fields

CLUSTER_HUB_VARIABLE = "RAYDEBUG_CLUSTER_HUB"
TOKEN_FILE_VARIABLE = "RAYDEBUG_TOKEN_FILE"
CERT_VARIABLE = "RAYDEBUG_HUB_CERT"
TASK_VARIABLE = "RAYDEBUG_RAY_TASK"
CHILD_VARIABLES = (CLUSTER_HUB_VARIABLE, TOKEN_FILE_VARIABLE, CERT_VARIABLE, TASK_VARIABLE)
RETRY_HUB_AFTER = 10.0  # seconds before a worker that could not find the hub asks again


_watching = False
_hub_failed_at: float | None = None
_token_files: dict[str, str] = {}  # token -> the file this process wrote it to


def watch_children() -> None:
    """Call :func:`prepare_children` before every process this worker starts: at
    ``os.fork()`` (multiprocessing, DataLoader workers) and in ``fork_exec`` (``subprocess``,
    multiprocessing's spawn). Installing twice changes nothing."""
    global _watching
    if _watching:
        return
    _watching = True
    os.register_at_fork(before=prepare_children)
    import _posixsubprocess

    _posixsubprocess.fork_exec = _preparing(_posixsubprocess.fork_exec)
    if hasattr(subprocess, "_fork_exec"):  # Python >= 3.11 binds it at import
        subprocess._fork_exec = _preparing(subprocess._fork_exec)


def _preparing(fork_exec: Any) -> Any:
    """``fork_exec`` that first calls :func:`prepare_children`. An ``env`` given to the call
    (argument 6 in every Python we support) that carries raydebug's variables gets their
    current values: it was copied from ``os.environ`` when they may have been older."""

    def fork_exec_for_a_task(*args: Any) -> Any:
        prepare_children()
        if len(args) > 5 and args[5] is not None:
            args = (*args[:5], _refreshed(args[5]), *args[6:])
        return fork_exec(*args)

    fork_exec_for_a_task.raydebug = True  # type: ignore[attr-defined]
    return fork_exec_for_a_task


def _refreshed(env_list: Any) -> Any:
    prefixes = tuple(f"{name}=".encode() for name in CHILD_VARIABLES)
    if not any(bytes(entry).startswith(prefixes) for entry in env_list):
        return env_list  # an environment of the caller's own making: theirs to decide
    kept = [entry for entry in env_list if not bytes(entry).startswith(prefixes)]
    return kept + [f"{name}={os.environ[name]}".encode()
                   for name in CHILD_VARIABLES if name in os.environ]


def prepare_children() -> None:
    """Put in ``os.environ`` what a process this worker is about to start needs to pause as
    a session of its own (see the module docstring). Never raises: a failure here must not
    stop the child from starting; its ``breakpoint()`` says what is missing."""
    global _hub_failed_at
    if not in_ray_worker():
        return  # a fork child passes on what it inherited
    try:
        # not at import: a worker's setup hook installs this, and most start no process
        from .hub_actor import HUB_ACTOR_NAME, find_or_start_hub

        if ray.get_runtime_context().get_actor_name() == HUB_ACTOR_NAME:
            return  # the hub actor (it inherits a job's setup hook) must not wait for itself
        os.environ[TASK_VARIABLE] = json.dumps(
            {**session_fields(), "parent_pid": os.getpid()})
        if os.environ.get("RAYDEBUG_HUB"):
            return  # an explicit hub: the children inherit its variables as they are
        if _hub_failed_at is not None and time.monotonic() - _hub_failed_at < RETRY_HUB_AFTER:
            return
        info = find_or_start_hub()
        os.environ[CLUSTER_HUB_VARIABLE] = info.worker
        os.environ[TOKEN_FILE_VARIABLE] = _token_file(info.token)
        if info.cert:
            os.environ[CERT_VARIABLE] = info.cert
        else:
            os.environ.pop(CERT_VARIABLE, None)
        _hub_failed_at = None
    except Exception as error:  # Ray's errors are many; the child must still start
        _hub_failed_at = time.monotonic()
        from ...agent.report import say

        say(f"processes started by this task will not reach the hub: {error}")


def _token_file(token: str) -> str:
    """A 0600 file in the user's raydebug state directory holding ``token``; one per hub."""
    path = _token_files.get(token)
    if path is None:
        from ... import state_file  # (pathlib)

        name = "hub-token-" + hashlib.sha256(token.encode()).hexdigest()[:16]
        target = state_file.directory() / name
        if not target.exists():
            state_file.write_private(target, token.encode())
        path = _token_files[token] = str(target)
    return path
