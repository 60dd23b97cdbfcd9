"""This process's cluster breakpoints: the hub's breakpoint set, armed without pydevd.

The arm (:mod:`raydebug.agent.armed`) is made at the hub's first non-empty set, on the link
thread: a process whose cluster has none never imports it (docs/design.md#agent-import).
The IDE's ``uncaught`` exception filter is not armed: it sets ``RAYDEBUG_POST_MORTEM``
while it is in the set.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from types import FrameType, TracebackType
from typing import TYPE_CHECKING, Any

from . import fork_guard
from .config import process_labels
from .metadata import ray_fields
from .report import say

if TYPE_CHECKING:
    from .armed.breakpoints import ArmedBreakpoints

POST_MORTEM_VARIABLE = "RAYDEBUG_POST_MORTEM"


class Arming:
    """Arms the hub's breakpoint set in this process; thread-safe.

    ``on_hit(frame)``: a breakpoint was hit (pause there); ``on_raised(frame, exception,
    traceback)``: the ``raised`` filter met an exception; ``on_log(text, frame)``: a
    logpoint's line; ``on_snapshot(frame)``: a snapshot point's hit (capture, no pause);
    ``on_loaded(paths)``: files whose breakpoints were armed as they loaded;
    ``standing_down()``: whether a client debugs this process now (its pydevd has the same
    breakpoints and does the pausing).
    """

    def __init__(self, *, on_hit: Callable[[FrameType], None],
                 on_raised: Callable[[FrameType, BaseException, TracebackType | None], None],
                 on_log: Callable[[str, FrameType], None],
                 on_snapshot: Callable[[FrameType], object],
                 on_loaded: Callable[[list[str]], None],
                 standing_down: Callable[[], bool]) -> None:
        self._on_hit = on_hit
        self._on_raised = on_raised
        self._on_log = on_log
        self._on_snapshot = on_snapshot
        self._on_loaded = on_loaded
        self._standing_down = standing_down
        self._post_mortem_set = False  # RAYDEBUG_POST_MORTEM is ours (an IDE's filter)
        self._breakpoints: ArmedBreakpoints | None = None  # made by the first armed set
        self._breakpoints_lock = threading.Lock()

    @property
    def breakpoints(self) -> ArmedBreakpoints:
        """This process's cluster breakpoints: armed without pydevd; a hit pauses
        as a session. While a client debugs this process, its pydevd has the same
        breakpoints (the hub sends them to every child session), so the armed ones leave
        the pausing to it; their logpoints still log to the hub. Made at first use (the
        hub's first non-empty set): a process whose cluster has none never imports the arm
        (docs/design.md#agent-import)."""
        with self._breakpoints_lock:
            if self._breakpoints is None:
                # on the link thread as the hub's set comes; the backend too is imported
                with fork_guard.importing():
                    from .armed.breakpoints import ArmedBreakpoints

                    self._breakpoints = ArmedBreakpoints(
                        on_hit=self._on_hit, on_log=self._on_log,
                        labels=process_labels,
                        remote_root=_remote_root, on_loaded=self._on_loaded,
                        standing_down=self._standing_down,
                        on_raised=self._on_raised, on_snapshot=self._on_snapshot)
            return self._breakpoints

    def reinstall(self) -> None:
        """Put the armed set back (see :meth:`ArmedBreakpoints.reinstall`), if there is one."""
        if self._breakpoints is not None:
            self._breakpoints.reinstall()

    def arm(self, breakpoints: dict[str, Any]) -> None:
        """Make the hub's wire set ``breakpoints`` this process's cluster breakpoints. A
        malformed set is said on stderr; the old one stays armed."""
        if self._breakpoints is None and not any(
                breakpoints.get(key) for key in ("sources", "functions", "exceptions")):
            self._post_mortem_for_ide(False)  # an empty set, and none armed: nothing to do
            return
        with fork_guard.importing():
            from .armed.breakpoints import BreakpointSet
        try:
            wanted = BreakpointSet.from_wire(breakpoints)
        except (KeyError, TypeError, ValueError) as error:
            say(f"ignored the hub's breakpoints ({type(error).__name__}: {error})")
            return
        self.breakpoints.arm(wanted)
        self._post_mortem_for_ide("uncaught" in wanted.exceptions)

    def forget_after_fork(self) -> None:
        """In a fork child: the parent's armed callbacks would pause through the abandoned
        agent; the child's own agent arms the cluster's set when its link connects."""
        if self._breakpoints is not None:
            self._breakpoints.forget_after_fork()

    def _post_mortem_for_ide(self, wanted: bool) -> None:
        """The IDE's "uncaught" exception filter: what ``RAYDEBUG_POST_MORTEM=1`` does,
        while it is set (Ray's post-mortem hook reads the variable at each task's failure;
        processes started meanwhile inherit it). A variable the user set stays."""
        if wanted and POST_MORTEM_VARIABLE not in os.environ:
            os.environ[POST_MORTEM_VARIABLE] = "1"
            self._post_mortem_set = True
        elif not wanted and self._post_mortem_set:
            os.environ.pop(POST_MORTEM_VARIABLE, None)
            self._post_mortem_set = False


def _remote_root() -> str | None:
    """Where Ray's working_dir is on this node, if this process runs in one."""
    root = ray_fields().get("remote_root")
    return root if isinstance(root, str) else None

