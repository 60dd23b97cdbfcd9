"""The live link: a process linked to the hub from its start, not only from its first pause.

Theory of operation. ``RAYDEBUG_LIVE=1`` (through raydebug's startup ``.pth``), or the Ray
integration (a Ray worker's setup hook, a driver's post-init hook), calls
:func:`raydebug.agent.start_live_link`. It
creates the process's agent and starts its link thread, invisible to pydevd, which connects
in the background and, after ``Identify``, sends ``Register`` with the process's record
(:func:`process_record`) on every (re)connect. Then the thread sleeps in a blocking
``select()`` until the hub speaks: no debugpy import, no tracing, no timer, no polling. The
hub asks for stacks (read by the link thread itself, :mod:`raydebug.agent.stacks`) and for
pauses (pydevd is started then, on the link thread: see
:meth:`raydebug.agent.pause_all.PauseAll.pause_all_threads`).

Hub down at start: the process runs on, the link says so once on stderr and retries with
backoff; a restarted hub gets the process back at the next attempt. A fork child drops its
parent's link (see :mod:`raydebug.agent`) and, when its parent was live, starts its own
(:func:`forget_after_fork`), naming its parent by pid.

What a process runs *now* (a Ray worker's task) is read when the hub asks, from the
installed discovery's ``current_activity()``: never recorded per task.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

from ...process_record import RAY_FIELDS, ProcessRecord
from ..config import process_labels
from ..flags import is_on
from . import discovery

LIVE_VARIABLE = "RAYDEBUG_LIVE"

_started = False
_identity: dict[str, Any] = {}  # what the integration said about this process at start
_since = time.time()
_parent_pid: int | None = None


def enabled(environ: dict[str, str] | os._Environ[str] = os.environ) -> bool:
    """Whether ``RAYDEBUG_LIVE`` asks for a live link (``1``, ``true``, ``yes``, ``on``)."""
    return is_on(environ.get(LIVE_VARIABLE))


def is_live() -> bool:
    return _started


def remember(identity: dict[str, Any] | None) -> None:
    """Keep the integration's fields for the record (Ray's job, node, worker ids), read by
    the caller on a thread where that is safe."""
    if identity:
        _identity.update(identity)


def mark_started() -> None:
    global _started
    _started = True


def forget_after_fork(parent_pid: int) -> bool:
    """In a fork child: whether the parent was live (then the child is a new process,
    with its own start time, naming its parent)."""
    global _started, _since, _parent_pid
    was_live, _started = _started, False
    _since = time.time()
    _parent_pid = parent_pid
    _identity.clear()  # the parent's Ray ids: the child says whose task started it
    return was_live


def process_record() -> ProcessRecord:
    """This process as it is now: ``Identify`` carries part of it, ``Register`` all of it
    (the hub adds id, state, sessions). Ray's ids are the integration's (:func:`remember`),
    else those of the Ray task that started this process, else None."""
    import socket  # not at import: ``raydebug.agent`` stays free of sockets until used

    inherited = discovery.inherited_task()
    return ProcessRecord(
        pid=os.getpid(),
        host=socket.gethostname(),
        argv=list(sys.argv),
        python=sys.version.split()[0],
        labels=process_labels(),
        since=_since,
        parent_pid=_parent_pid if _parent_pid is not None else os.getppid(),
        **{name: _identity.get(name, inherited.get(name)) for name in RAY_FIELDS},
    )


def session_identity() -> dict[str, Any]:
    """The cluster's ids for a session that the link thread makes (``raydebug pause``):
    the registered ones and what the process runs now, without asking Ray's runtime context
    on the link thread (whose task is none)."""
    record = process_record()
    identity = {name: getattr(record, name) for name in RAY_FIELDS
                if getattr(record, name) is not None}
    identity.update({k: v for k, v in current_activity().items() if k in RAY_FIELDS})
    return identity


def wait_for_the_start(span: float | None = None, longest: float | None = None) -> None:
    """Sleep until this process has started, before the link thread's own work (importing
    and making the agent, the hub's lookup, the handshake: CPU holding the GIL), so that
    work is not taken from the process's start (docs/design.md#live-link).

    Returns once the main thread has used less than :data:`IDLE_SHARE` of each of
    :data:`IDLE_SPANS` spans in a row of ``span`` seconds (default :data:`START_SPAN`) on its
    own CPU clock (it waits for a task or a lock, or it has ended), or once ``longest``
    seconds (default :data:`START_AT_LATEST`) have passed (a main thread that computes from
    its start), whichever is first. Without a CPU clock per thread it returns after one
    span. It runs on the daemon link thread: a process that ends sooner (``python -c``)
    never waits for it at its exit."""
    span = START_SPAN if span is None else span
    deadline = time.monotonic() + (START_AT_LATEST if longest is None else longest)
    main_cpu = _main_thread_cpu()
    idle_spans = 0
    while True:
        before = main_cpu() if main_cpu is not None else 0.0
        time.sleep(span)
        if main_cpu is None or time.monotonic() >= deadline:
            return
        try:
            idle_spans = idle_spans + 1 if main_cpu() - before < span * IDLE_SHARE else 0
        except OSError:  # the main thread has ended
            return
        if idle_spans == IDLE_SPANS:
            return


START_SPAN = 0.05  # seconds
IDLE_SHARE = 0.1  # of a span's time on a CPU: the main thread has started
IDLE_SPANS = 2
START_AT_LATEST = 1.0


def _main_thread_cpu() -> Callable[[], float] | None:
    """A function giving the main thread's CPU seconds so far, or None where there is no
    such clock (it is Linux's and the BSDs')."""
    try:
        clock = time.pthread_getcpuclockid(threading.main_thread().ident or 0)
        time.clock_gettime(clock)
    except (AttributeError, OSError):
        return None
    return lambda: time.clock_gettime(clock)


def service_threads() -> frozenset[str]:
    """The names of the installed cluster's service threads in this process (a Ray
    driver's log printer): a library's, never the user's code; none outside a cluster."""
    return frozenset(getattr(discovery.installed(), "service_threads", ()))


def current_activity() -> dict[str, Any]:
    """What the process runs at this moment (``task_name``, ``actor_class``), from the
    installed discovery; ``{}`` when it cannot tell. Called on the link thread."""
    activity = getattr(discovery.installed(), "current_activity", None)
    if activity is None:
        return {}
    try:
        return dict(activity())
    except Exception:  # a question about the process must not break its link
        return {}
