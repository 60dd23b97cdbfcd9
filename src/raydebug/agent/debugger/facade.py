"""The process's pydevd, as the agent uses it: started on first use, watched while it works.

Theory of operation. debugpy is imported only when a thread pauses, never at a process's
start: on Python <= 3.11 pydevd's tracing, once installed, slows pure-Python code several
times over (docs/design.md#lazy-debugpy), and Ray reuses its workers. :class:`Debugger` is
the one object the agent talks to; each of its jobs lives in a module of its own:

- ``start``: pydevd in-process with its own DAP adapter, listening on no port, blind
  to raydebug's files and threads (:func:`mark_invisible`);
- ``clients``: each client's data connection, dialled out to the hub and authenticated by
  the agent, handed to pydevd as its accept thread would have; dropped when the client leaves;
- ``suspensions``: which threads are suspended (pydevd has no notification for it), the
  stepping-bug workaround, and pauses a departing client must not take with it;
- ``tracing_keeper``: tracing follows need, not attachment;
- ``untraced``: a stop made outside a trace function, which pydevd must not trace;
- ``blocked_threads``: a thread a pause finds blocked in C, served by a stand-in;
- ``fork``: a fork child's reset of the pydevd it inherited.

``returns`` (a paused function that returned) is the agent's, beside this object.

Every pydevd internal used by them is listed, with why, in docs/pydevd_internals.md.
"""

from __future__ import annotations

import contextlib
import socket
import sys
import threading
from collections.abc import Callable
from types import FrameType, TracebackType
from typing import Any

from . import clients
from .blocked_threads import BlockedThreads
from .fork import reset_pydevd_after_fork
from .start import make_private, mark_invisible, spare_threads, start_pydevd
from .suspensions import Suspensions
from .tracing_keeper import TracingKeeper, remove_tracing
from .untraced import Untraced

__all__ = ["Debugger", "ExcInfo", "mark_invisible"]

ExcInfo = tuple[type[BaseException], BaseException, TracebackType]
# pydevd.settrace's host: pydevd, once started, uses none, but resolves "localhost" when
# none is given (getaddrinfo, 0.5-10 ms on a pause's way to its stop).
STARTED_HOST = "127.0.0.1"


class Debugger:
    """pydevd inside this process. Thread-safe; :meth:`ensure_started` is idempotent.

    ``on_suspended(ident, frame)`` runs on a thread as it suspends in pydevd,
    ``on_resumed(ident)`` as it runs again, ``on_untraced()`` after pydevd's tracing was
    removed (on the tracing keeper's thread). ``spared(thread)``: whether ``thread`` is a
    library's service thread that a stop elsewhere must not suspend (see
    :func:`.start.spare_threads`).
    """

    def __init__(
        self, on_suspended: Callable[[int, FrameType | None], None],
        on_resumed: Callable[[int], None], on_untraced: Callable[[], None] | None = None,
        spared: Callable[[threading.Thread], bool] = lambda thread: False
    ) -> None:
        self._on_suspended = on_suspended
        self._on_resumed = on_resumed
        self._spared = spared
        # Held while pydevd starts, and while its tracing is installed or removed.
        self._start_lock = threading.Lock()
        self._py_db: Any = None
        self._start_error: Exception | None = None
        self._suspensions = Suspensions()
        self._tracing = TracingKeeper(self._start_lock, self._suspensions, on_untraced)
        self.blocked = BlockedThreads(self.innermost_user_frame)  # threads a pause finds in C

    def ensure_started(self) -> None:
        """Start pydevd if it is not running (the first time imports debugpy:
        docs/design.md#first-pause); idempotent.

        Safe on any thread, the pausing one or the link's: whoever comes first starts it,
        the others wait on the start lock, so pydevd is complete (imported, started, its
        listener shut, suspensions watched) when this returns. Raises what the start raised;
        after a failed start pydevd's tracing is removed again, and every later call raises
        the same error (debugpy can be started once per process).
        """
        with self._start_lock:
            if self._py_db is not None:
                return
            if self._start_error is not None:
                raise self._start_error
            try:
                self._start()
            except Exception as error:
                self._start_error = error
                raise

    @property
    def started(self) -> bool:
        """Whether pydevd is running here (a pause then needs no import before its stop)."""
        return self._py_db is not None

    def _start(self) -> None:
        py_db = start_pydevd()
        try:
            make_private(py_db)
            spare_threads(self._spared)
            self._suspensions.watch(py_db, self._on_suspended, self._thread_resumed)
            self._suspensions.hold_unanswered_stops(self._tracing.before_request,
                                                    self._tracing.after_request)
        except BaseException:
            with contextlib.suppress(Exception):  # not half-traced: the process runs on
                remove_tracing(py_db)
            raise
        self.blocked.install(py_db)  # outside the suspensions' watch: it may skip a stop
        self._tracing.start(py_db)
        self._py_db = py_db  # last: a started debugger is a complete one

    def _thread_resumed(self, ident: int) -> None:
        self._on_resumed(ident)
        self.reconsider_tracing()  # e.g. `continue` with nothing else to stop for

    # -- clients -------------------------------------------------------------------------------

    def serve_client(self, sock: socket.socket) -> None:
        """Make ``sock`` (connected, authenticated) pydevd's client connection, starting
        pydevd first if need be (see :func:`.clients.serve`); the previous client,
        if any, is disconnected without resuming threads."""
        self.ensure_started()
        self._suspensions.new_client()
        clients.serve(self._py_db, sock)

    def forget_client(self) -> None:
        """After a client left: drop what pydevd queued for it, and whatever it would queue
        (or the process could never exit: see :func:`.clients.forget`)."""
        if self._py_db is None:
            return
        clients.forget(self._py_db)

    def replay_stops(self, idents: set[int]) -> int:
        """Tell the connected client about threads that stayed suspended from an earlier client.

        ``idents`` are threads suspended before the client became ready (a snapshot taken
        before releasing new pauses, so none is announced twice). Returns how many were.
        """
        return clients.replay_stops(self._py_db, idents)

    def resume_all(self) -> None:
        """Let every thread suspended in pydevd run on, as a ``continue`` of all threads
        would (threads told to stop that have not stopped yet are not resumed)."""
        if self._py_db is None:
            return
        from _pydevd_bundle.pydevd_api import PyDevdAPI

        PyDevdAPI().request_resume_thread("*")

    def take_held_over(self) -> tuple[set[int], bool]:
        """After a client left: the threads whose pause it did not take, and whether it sent
        ``disconnect`` (see :meth:`.Suspensions.take_held_over`). Each call returns them once."""
        return self._suspensions.take_held_over()

    # -- stops ---------------------------------------------------------------------------------

    def stop_at(self, frame: FrameType, under_client: bool = False) -> None:
        """Make the current thread stop at the next line ``frame`` runs (like pdb.set_trace).

        Returns at once; the stop happens when the caller's frame executes its next line, and
        no resume can cancel it before (see :meth:`.Suspensions.hold_unanswered_stops`).
        ``under_client``: a client is attached and ready, and this pause is new to it.
        """
        import pydevd

        self._suspensions.about_to_stop(threading.get_ident(), under_client, frame)
        with self._start_lock:
            # Every thread (breakpoints may be set in any of them); this one by settrace.
            self._tracing.arm_locked(calling_thread=False)
            pydevd.settrace(
                host=STARTED_HOST,
                suspend=True,
                trace_only_current_thread=True,
                patch_multiprocessing=False,
                stop_at_frame=frame,
                notify_stdin=False,
            )

    def stop_here(self, frame: FrameType, under_client: bool = False) -> None:
        """Suspend the current thread now, in ``frame`` at its current line, before that line
        runs (a cluster breakpoint's hit: see :mod:`raydebug.agent.armed.breakpoints`); block
        until resumed.

        What pydevd's own tracer does at a breakpoint (``set_suspend`` + ``do_wait_suspend``),
        after putting its tracing on ``frame`` and its callers, so that a step afterwards goes
        on in pydevd. Called from inside a trace function, a ``sys.monitoring`` callback, or
        the call that rewritten code makes before the line (3.10/3.11): pydevd traces none
        of it (:class:`.Untraced`), or it would stop again in the code this stop runs.
        """
        from _pydevd_bundle.pydevd_comm_constants import CMD_SET_BREAK

        with Untraced(self._py_db, threading.current_thread()):
            thread = self._prepare_stop_here(frame, under_client)
            self._py_db.set_suspend(thread, CMD_SET_BREAK)
            self._py_db.do_wait_suspend(thread, frame, "line", None)

    def stop_paused(self, thread: threading.Thread, frame: FrameType,
                    under_client: bool = False) -> None:
        """Suspend the current thread (``thread``), asked to pause, in the user's frame at
        or below ``frame`` (:meth:`user_frame`), at its current line; block until resumed.
        For a thread that entered Python again above that frame (a signal handler): the
        stop's stack starts there, the frames above it are never shown. Made outside a
        trace function: kept from pydevd's tracing (:class:`.Untraced`) from its first
        line, or pydevd, asked to pause this thread, would stop it in the code this stop
        runs."""
        with Untraced(self._py_db, thread):
            frame = self.user_frame(frame)
            self._prepare_stop_here(frame, under_client)
            with Untraced(self._py_db, thread):  # the preparation traced it again (3.12+)
                # No set_suspend: pydevd has it from the pause; a second one, on 3.13,
                # suspends pydevd's next new thread too (the client's hand-off: no attach).
                self._py_db.do_wait_suspend(thread, frame, "line", None)

    def stop_on_raised(self, frame: FrameType, exception: BaseException,
                       traceback: TracebackType | None, under_client: bool = False) -> None:
        """Suspend the current thread in ``frame``, where ``exception`` was just raised
        (``traceback``: its traceback so far; on 3.10/3.11 not yet its ``__traceback__``) (the
        ``raised`` filter's stop: :mod:`raydebug.agent.armed.raised`), as pydevd does for a caught
        exception: reason ``exception``, its type and text as ``exceptionInfo`` tells
        them; block until resumed. Called from inside a trace function or a callback."""
        from _pydevd_bundle.pydevd_comm_constants import CMD_STEP_CAUGHT_EXCEPTION
        from _pydevd_bundle.pydevd_constants import EXCEPTION_TYPE_HANDLED
        from _pydevd_bundle.pydevd_frame_utils import (
            add_exception_to_frame,
            remove_exception_from_frame,
        )

        thread = self._prepare_stop_here(frame, under_client)
        arg = (type(exception), exception, traceback or exception.__traceback__)
        py_db = self._py_db
        add_exception_to_frame(frame, arg)
        try:
            py_db.send_caught_exception_stack(thread, arg, id(frame))
            py_db.set_suspend(thread, CMD_STEP_CAUGHT_EXCEPTION)
            py_db.do_wait_suspend(thread, frame, "exception", arg,
                                  exception_type=EXCEPTION_TYPE_HANDLED)
            py_db.send_caught_exception_stack_proceeded(thread)
        finally:
            remove_exception_from_frame(frame)

    def _prepare_stop_here(self, frame: FrameType, under_client: bool) -> threading.Thread:
        """pydevd started and tracing ``frame`` and its callers, so that a step from a stop
        there goes on in pydevd; returns the current thread."""
        import pydevd

        traced: FrameType | None = frame
        while traced is not None:  # 3.10/3.11: the raised filter took their lines away
            traced.f_trace_lines = True
            traced = traced.f_back
        thread = threading.current_thread()
        self._suspensions.about_to_stop(thread.ident or 0, under_client, frame)
        with self._start_lock:
            self._tracing.arm_locked(calling_thread=False)  # this one: by settrace
            pydevd.settrace(host=STARTED_HOST, suspend=False, trace_only_current_thread=True,
                            patch_multiprocessing=False, notify_stdin=False)
        py_db = self._py_db
        py_db.set_trace_for_frame_and_parents(thread.ident, frame)
        if sys.version_info >= (3, 12):
            # What pydevd.settrace(suspend=True) does last: lines that pydevd's tool
            # disabled in an earlier session report to it again (or a step skips them).
            from _pydevd_sys_monitoring import pydevd_sys_monitoring

            pydevd_sys_monitoring.update_monitor_events(suspend_requested=True)
            pydevd_sys_monitoring.restart_events()
        return thread

    def pausable_threads(self, skip: set[int]) -> list[tuple[threading.Thread, FrameType]]:
        """The Python threads a pause would suspend, with their current frames: every
        thread but raydebug's and pydevd's own, those in ``skip``, and those but the main
        one that run no frame of the user's code (pydevd started); a thread started outside
        ``threading`` (Ray's pool) included, given a record first.

        A thread of a library's own (a Ray driver's log printer, an idle pool worker) would
        stop where it is, in code "just my code" hides: a session that shows nothing, and a
        driver that stopped printing its workers' logs. One blocked in C was let go after a
        moment (:mod:`.blocked_threads`); one that runs Python (``print_logs`` polls)
        stopped. The main thread is asked all the same, as it is served blocked in C: a Ray
        worker between tasks is a session that says it runs no task."""
        from _pydevd_bundle import pydevd_utils

        from .thread_tracing import register_foreign_threads

        register_foreign_threads()
        frames = sys._current_frames()
        return [(thread, frames[thread.ident])
                for thread in pydevd_utils.get_non_pydevd_threads()
                if thread.ident in frames and thread.ident not in skip
                and not getattr(thread, "pydev_do_not_trace", False)
                and (thread is threading.main_thread()
                     or self.innermost_user_frame(frames[thread.ident]) is not None)]

    @staticmethod
    def stopped_for_a_pause(thread: threading.Thread) -> bool:
        """Whether ``thread``, suspending now, was asked to pause (DAP ``pause``, or
        :meth:`suspend_threads`), not stopped at a breakpoint or a step's end."""
        from _pydevd_bundle.pydevd_comm_constants import CMD_THREAD_SUSPEND

        return bool(getattr(thread, "stop_reason", None) == CMD_THREAD_SUSPEND)

    def suspend_threads(self, threads: list[threading.Thread]) -> None:
        """Ask pydevd to suspend ``threads`` (as DAP ``pause`` does), from any thread.

        Returns at once. Each thread suspends at its next Python line; one blocked in C
        when it returns to Python. Tracing is armed first, under the start lock, so the
        keeper cannot take it out in between; it then stays on while a thread is asked to
        pause (see :mod:`.tracing_keeper`). With no client attached yet, pydevd's notices
        go to its placeholder writer; the client that attaches is told of each stop
        (:meth:`replay_stops`).
        """
        from _pydevd_bundle.pydevd_comm_constants import CMD_THREAD_SUSPEND

        with self._start_lock:
            self._tracing.arm_locked()
            for thread in threads:
                self._py_db.set_suspend(thread, CMD_THREAD_SUSPEND, is_pause=True)

    def withdraw_pause(self, threads: list[threading.Thread]) -> None:
        """Take back the pause asked of ``threads`` (none suspended): each runs on, untraced
        once nothing else needs tracing, when it returns to Python. What a ``continue`` of
        those threads does to pydevd's request (``internal_run_thread``)."""
        from _pydevd_bundle import pydevd_thread_lifecycle
        from _pydevd_bundle.pydevd_additional_thread_info import set_additional_thread_info

        with self._start_lock:
            for thread in threads:
                pydevd_thread_lifecycle.internal_run_thread(thread, set_additional_thread_info)
        self.reconsider_tracing()

    @staticmethod
    def is_asked_to_pause(thread: threading.Thread) -> bool:
        """Whether pydevd still means to suspend ``thread`` (asked by :meth:`suspend_threads`
        or suspended): False once a resume of it cancelled that."""
        from _pydevd_bundle.pydevd_constants import STATE_SUSPEND

        info = getattr(thread, "additional_info", None)
        return info is not None and info.pydev_state == STATE_SUSPEND

    def stop_on_exception(self, exc_info: ExcInfo) -> None:
        """Suspend the current thread post-mortem in the frame that raised; block until resumed."""
        self._suspensions.about_to_stop(threading.get_ident())
        with self._start_lock:
            self._tracing.arm_locked()
        self._py_db.trigger_exception_handler(exc_info, as_uncaught=False)

    def returns_to_other_code(self, frame: FrameType) -> bool:
        """Whether returning from ``frame`` leaves the user's code: its caller is a
        library's (Ray's task executor, a thread pool), or there is no Python caller."""
        caller = frame.f_back
        if caller is None or self._py_db is None:
            return True
        try:
            return bool(self._py_db.apply_files_filter(caller, caller.f_code.co_filename, True))
        except Exception:  # pydevd's internals moved: keep its own stepping
            return False

    def user_frame(self, frame: FrameType) -> FrameType:
        """The innermost frame of the user's code from ``frame`` outwards (a thread blocked
        in ``Event.wait()`` is in ``threading.py``, called from the user's line); ``frame``
        itself if no caller is the user's (pydevd started)."""
        return self.innermost_user_frame(frame) or frame

    def innermost_user_frame(self, frame: FrameType) -> FrameType | None:
        """The innermost frame of the user's code from ``frame`` outwards, as pydevd's
        "just my code" tells it (a library's or the standard library's is not); None if no
        frame of that stack is the user's (pydevd started)."""
        found: FrameType | None = frame
        while found is not None:
            try:
                if not self._py_db.apply_files_filter(found, found.f_code.co_filename, True):
                    return found
            except Exception:  # pydevd's internals moved: stop where the signal came
                return frame
            found = found.f_back
        return None

    @staticmethod
    def cancel_step() -> None:
        """Let the current thread run on instead of finishing a step.

        A step off the end of the user's code never comes back to it in a Ray worker:
        pydevd, stepping "into my code", would stop in whatever code of no library the
        Ray worker runs next (Ray's ``<string>`` helpers, the next task).
        """
        info = getattr(threading.current_thread(), "additional_info", None)
        if info is not None:
            info.pydev_step_cmd = -1
            info.pydev_step_stop = None

    def is_suspended(self, thread_ident: int) -> bool:
        return self._suspensions.is_suspended(thread_ident)

    def suspended_threads(self) -> set[int]:
        return self._suspensions.suspended_threads()

    # -- tracing follows need (see tracing_keeper) -------------------------------------------

    def reconsider_tracing(self) -> None:
        """Ask for tracing to be removed if nothing needs it any more (returns at once)."""
        self._tracing.reconsider()

    def wait_untraced(self, timeout: float) -> bool:
        """Wait until tracing is off (for tests and benchmarks); False on timeout."""
        return self._tracing.wait_untraced(timeout)

    def is_traced(self) -> bool:
        return self._tracing.is_traced()

    # -- fork --------------------------------------------------------------------------------

    def reset_after_fork(self) -> None:
        """In a fork child: forget the parent's pydevd so that the child can start its own
        (see :mod:`.fork`)."""
        if self._py_db is None:
            return
        reset_pydevd_after_fork(self._py_db)
        self._suspensions.restore_after_fork()
        self.blocked.restore_after_fork()
        self._py_db = None
