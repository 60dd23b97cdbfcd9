"""What a session says about itself: where it paused, in which process, on which host."""

from __future__ import annotations

import dataclasses
import linecache
import os
import secrets
import socket
import sys
import threading
import time
from types import FrameType
from typing import Any

from ..session import REASON_BREAKPOINT, REASON_EXCEPTION, PausedThread
from .config import process_labels
from .link import discovery


def new_session_id() -> str:
    return secrets.token_hex(6)


def session_labels() -> dict[str, str]:
    """A session's labels: its process's (:func:`.config.process_labels`) and, in a process
    a Ray task started that is not itself in the cluster, ``parent_pid``: the pid of the Ray
    worker that started it (a session's record has no field for it; a process's has)."""
    labels = process_labels()
    parent = discovery.inherited_task().get("parent_pid")
    if parent is not None and not discovery.installed().in_cluster():
        labels["parent_pid"] = str(parent)
    return labels


def record_for_frame(
    frame: FrameType,
    reason: str = REASON_BREAKPOINT,
    exception: BaseException | None = None,
    thread: threading.Thread | None = None,
    identity: dict[str, Any] | None = None,
    cluster_breakpoint: bool = False,
    blocked_in_c: bool = False,
) -> PausedThread:
    """Describe a pause at ``frame`` of ``thread`` (default: the current thread).

    ``identity``: the cluster's ids of the process (default: :func:`ray_fields`, which asks
    the runtime context of the *calling* thread; another thread's pause passes its own).
    ``blocked_in_c``: the thread has not stopped, it is still in a C call below ``frame``."""
    code = frame.f_code
    line = frame.f_lineno or code.co_firstlineno
    return PausedThread(
        **(ray_fields() if identity is None else identity),
        id=new_session_id(),
        pid=os.getpid(),
        host=socket.gethostname(),
        file=code.co_filename,
        line=line,
        function=code.co_name,
        reason=reason if exception is None else REASON_EXCEPTION,
        exception=describe_exception(exception) if exception is not None else None,
        source=linecache.getline(code.co_filename, line).strip(),
        thread=(thread or threading.current_thread()).name,
        since=time.time(),
        argv=list(sys.argv),
        labels=session_labels(),
        cluster_breakpoint=cluster_breakpoint,
        blocked_in_c=blocked_in_c,
    )


def came_back(record: PausedThread, frame: FrameType) -> PausedThread:
    """``record`` of a thread that was blocked in C, now stopped at ``frame`` (same id)."""
    line = frame.f_lineno or frame.f_code.co_firstlineno
    return dataclasses.replace(
        record, file=frame.f_code.co_filename, line=line, function=frame.f_code.co_name,
        source=linecache.getline(frame.f_code.co_filename, line).strip(), blocked_in_c=False)


def ray_fields() -> dict[str, Any]:
    """Ray's identities of the current task, when this process is part of a Ray cluster;
    in a process a Ray task started, those of that task (see :mod:`.discovery`)."""
    return discovery.installed().process_identity()


def describe_exception(exception: BaseException) -> str:
    import traceback  # not at import: a breakpoint() has no exception to describe

    return "".join(traceback.format_exception_only(type(exception), exception)).strip()


def innermost_frame(exception: BaseException) -> FrameType | None:
    """The frame that raised ``exception``: where post-mortem should look first."""
    tb = exception.__traceback__
    if tb is None:
        return None
    while tb.tb_next is not None:
        tb = tb.tb_next
    return tb.tb_frame
