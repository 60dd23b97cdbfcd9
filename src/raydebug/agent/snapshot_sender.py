"""Snapshots taken in this process and sent to the hub: the thread goes on at once.

Theory of operation. A failure (a Ray task's or actor method's exception, an uncaught one in
a thread or the main thread) or a snapshot point's hit calls :func:`send_failure` or
:func:`send_point` on the thread concerned, with the process's link. That thread captures
its frames (:mod:`raydebug.snapshots.capture`, a few milliseconds: ``bench/snapshots.py``),
posts the snapshot to the link's outbox, waits at most :data:`SEND_WAIT` for its local write
when the link is up, and returns: nothing waits for the hub, nothing is paused, and the task
fails (or runs on) exactly as it would without raydebug. The outbox keeps a snapshot across
a link not yet connected (a process that fails in its first second) until it is written; a
process that exits with one still queued waits at most :data:`SEND_AT_EXIT` seconds for it.
A per-process :class:`~raydebug.snapshots.limits.RateLimit` drops snapshots past a burst
(said once). Every entry point catches its own failures: a snapshot that cannot be taken is
one line on stderr, at most once.

``RAYDEBUG_SNAPSHOTS=1`` (``raydebug run --snapshots``, ``raydebug.runtime_env(snapshots=
True)``) turns failure snapshots on: :func:`raydebug.agent.install_snapshot_hooks` in any
process, and the Ray integration's task failure hook in Ray workers, both through
:func:`raydebug.agent.snapshot_failure`.
"""

from __future__ import annotations

import atexit
import uuid
from collections.abc import Callable
from types import FrameType, TracebackType
from typing import Any

from ..protocol.control import SnapshotTaken
from ..snapshots.capture import exception_snapshot_json, point_snapshot_json
from ..snapshots.limits import DEFAULT_LIMITS, RateLimit
from .own_frames import is_debugger_file
from .report import say

SEND_WAIT = 1.0  # seconds a snapshot waits at most to be written to a connected link
SEND_AT_EXIT = 3.0  # seconds an exiting process waits for its snapshots to leave

_rate = RateLimit(DEFAULT_LIMITS)
_said: set[str] = set()
TAKEN_MARK = "_raydebug_snapshot_taken"  # set on an exception once captured, to _PROCESS_MARK
_PROCESS_MARK = uuid.uuid4().hex  # this process's: a copy unpickled elsewhere is taken there
_exit_wait_registered = False


def send_failure(error: BaseException, link: Any, thread_name: str | None = None,
                 identity: dict[str, Any] | None = None,
                 start: TracebackType | None = None) -> str | None:
    """Capture ``error``'s traceback and post it on ``link`` (the process's
    :class:`~.link.hub_link.HubLink`, started here if it was not); the snapshot's id, or None
    when none was sent (rate spent; a failure: said once). ``identity``: the failing task's
    ids when the caller knows them better than this thread's runtime context; ``start``:
    where the user's part of the traceback starts, when the caller ran the failing code
    (:func:`~raydebug.snapshots.capture.exception_snapshot_json`). Never raises."""
    if _taken_before(error):
        return None
    return _send(link, lambda process: exception_snapshot_json(
        error, process, DEFAULT_LIMITS, hide=is_debugger_file, thread_name=thread_name,
        start=start),
        identity)


def _taken_before(error: BaseException) -> bool:
    """Whether ``error`` was captured already in this process (and mark it if not): one
    failure, one snapshot. Ray's task executor calls its failure hook twice for an exception
    that fails an async generator's task (a Ray Serve replica's HTTP request). A mark on the
    exception, not a set of them: exceptions take no weak reference, and a strong one would
    keep their frames' locals alive. The mark names this process: the exception pickled to
    the driver keeps it (and Ray's RayTaskError passes attributes on to its cause, hence
    ``vars``), and the driver's own failure is still taken there."""
    try:
        marks = vars(error)
    except TypeError:  # a class with __slots__ alone: taken each time
        return False
    if marks.get(TAKEN_MARK) == _PROCESS_MARK:
        return True
    marks[TAKEN_MARK] = _PROCESS_MARK
    return False


def send_point(frame: FrameType, link: Any) -> str | None:
    """Capture ``frame`` and its callers (a snapshot point's hit) and post it on ``link``,
    as :func:`send_failure`."""
    return _send(link, lambda process: point_snapshot_json(frame, process, DEFAULT_LIMITS,
                                                           hide=is_debugger_file))


def _send(link: Any, capture: Callable[[dict[str, Any]], dict[str, Any]],
          identity: dict[str, Any] | None = None) -> str | None:
    try:
        if not _rate.allow():
            _say_once(f"snapshots past {_rate.limits.burst} at once, then one per "
                      f"{_rate.limits.refill_seconds:g} s, are not taken in this process")
            return None
        # Built as the wire form; the link thread encodes it (one over a control message's
        # limit, which the capture's budget keeps it under, is dropped there, said so).
        message = SnapshotTaken(snapshot=capture(_process(identity)))
        link.start()  # a process that is not live links now, in the background
        link.post(message, keep=True)
        # Written before the thread goes on when the link is up (a Ray worker may end from
        # C once its job is done, and then no atexit sends what is queued): a local write,
        # not a wait for the hub. Not up yet: it waits in the queue, and at the exit.
        link.wait_sent(SEND_WAIT)
        _wait_at_exit(link)
        return str(message.snapshot["id"])
    except Exception as error:  # a snapshot must never break the user's program
        _say_once(f"no snapshot taken ({type(error).__name__}: {error})")
        return None


def _process(identity: dict[str, Any] | None = None) -> dict[str, Any]:
    """This process as the hub lists it, with what the calling thread runs now (a Ray
    task's ids: ``identity``, else the integration's discovery asks the runtime context of
    this thread)."""
    from .link import discovery, live

    record = live.process_record().to_dict()
    try:
        now = identity if identity is not None else discovery.installed().process_identity()
    except Exception:  # Ray's errors are many; the record is enough
        now = {}
    record.update({name: value for name, value in now.items() if value is not None})
    return record


def _wait_at_exit(link: Any) -> None:
    global _exit_wait_registered
    if not _exit_wait_registered:
        _exit_wait_registered = True
        atexit.register(link.wait_kept_sent, SEND_AT_EXIT)


def _say_once(line: str) -> None:
    if line not in _said:
        _said.add(line)
        say(line)
