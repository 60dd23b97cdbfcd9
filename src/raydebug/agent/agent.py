"""The agent: what ``breakpoint()`` does inside a process, and the bookkeeping of its pauses.

Theory of operation. A paused thread first waits *in raydebug*, not in pydevd, until a
client has attached to this process through the hub and finished its configuration: pydevd
cannot suspend a thread before its first client (it has nowhere to send ``stopped``), and a
client needs its breakpoints set before the thread moves. When the hub says ``ClientReady``
the agent releases every waiting thread; each then suspends in pydevd, which tells the client.
A thread that was already suspended in pydevd when an earlier client dropped is announced
again (:meth:`Debugger.replay_stops`).

A session ends when its thread runs again with no client attached (the client detached
cleanly and pydevd resumed everything, or the wait timed out), when the same thread pauses
somewhere else, when the function it paused in returns while a client steps or continues it
(:mod:`raydebug.agent.debugger.returns`), or when the process exits (the hub sees the connection
close). ``SessionEnded`` says which. The sessions and their ends are kept in
:mod:`.bookkeeping`.

``raydebug pause`` asks pydevd to suspend every Python thread; a thread becomes a session
(reason ``pause``) only when it has suspended, at the frame it stopped in: see
:mod:`.pause_all`. A hit of a cluster breakpoint, armed without pydevd (:mod:`.arming`),
pauses as ``breakpoint()`` does.

No pause is lost to a client that leaves: a pause that had not stopped under it, or that it
left no request to react to, stays paused and is registered with the hub again as waiting
(:meth:`Agent.on_client_detached`), so the next client gets it.
"""

from __future__ import annotations

import atexit
import os
import socket
import sys
import threading
import time
from types import FrameType, TracebackType
from typing import TYPE_CHECKING, Any

from ..protocol.control import (
    END_MOVED,
    END_RAISED,
    END_TIMEOUT,
    BreakpointsLoaded,
    CollectStacks,
    ControlMessage,
    LogpointOutput,
    Register,
    Resume,
    Resumed,
    SessionStarted,
    Stacks,
)
from ..session import PausedThread
from . import fork_guard, pause_signal
from .arming import Arming
from .bookkeeping import ParkedThread
from .config import AgentConfig
from .debugger.facade import Debugger, ExcInfo, mark_invisible
from .debugger.returns import ReturnWatcher
from .link import live
from .link.hub_link import HubLink
from .metadata import innermost_frame, record_for_frame
from .pause_all import PauseAll
from .report import pause_place, say, waiting_notice

if TYPE_CHECKING:
    from .armed.breakpoints import ArmedBreakpoints

FIRST_ATTEMPT_WAIT = 2.0  # seconds: how long a pause waits to know if the hub can be reached
LOGPOINT_SEND_WAIT = 1.0  # seconds a logpoint hit waits for its line to be written to the hub
SESSION_SEND_WAIT = 1.0  # seconds a pause new to an attached client waits for its SessionStarted
# A process's first pause is listed once pydevd has started, so that a client attaching at
# once finds it ready (connect -> `stopped` ~12 ms, not the ~100 ms of pydevd's import), but
# never later than this after the pause began: a loaded node takes seconds to start pydevd
# (docs/design.md#first-pause).
FIRST_LISTING_WAIT = 0.2
# Seconds, in all, a process's logpoint hits wait for a link that is not connected (see
# Agent._wait_unconnected_logpoints); its lines stay queued after that.
LOGPOINT_UNCONNECTED_BUDGET = 3.0


class Agent(PauseAll):
    """One per process; created on the first pause. The link's owner
    (:class:`~raydebug.agent.link.owner.LinkOwner`)."""

    def __init__(self, config: AgentConfig) -> None:
        super().__init__(config)
        self.arming = Arming(on_hit=self.pause_at_breakpoint, on_raised=self.pause_on_raised,
                             on_log=self._post_logpoint, on_loaded=self._post_loaded,
                             on_snapshot=self._take_snapshot,
                             standing_down=lambda: self._client_attached)
        self.debugger = Debugger(on_suspended=self._on_thread_suspended,
                                 on_resumed=self._on_thread_resumed,
                                 on_untraced=self.arming.reinstall,
                                 spared=_service_thread)
        self.returns = ReturnWatcher(self.debugger.is_suspended, self._on_returned,
                                     self.debugger.returns_to_other_code,
                                     self.debugger.cancel_step)
        self.link = HubLink(config, self)
        self._unconnected_logpoint_budget = LOGPOINT_UNCONNECTED_BUDGET
        self._logpoint_exit_wait = False
        pause_signal.serve(self.pause_blocked_main)

    @property
    def breakpoints(self) -> ArmedBreakpoints:
        """This process's cluster breakpoints (see :attr:`.arming.Arming.breakpoints`)."""
        return self.arming.breakpoints

    # -- entry points (called on the pausing thread) ----------------------------------------

    def pause_at(self, frame: FrameType) -> None:
        """``breakpoint()``: stop at ``frame``'s next line once a client is ready."""
        record = record_for_frame(frame)
        self.returns.follow(record.id, threading.get_ident(), frame)
        under_client = self._wait_for_client(record)
        if under_client is not None:
            self.debugger.stop_at(frame, under_client=under_client)

    def pause_at_breakpoint(self, frame: FrameType) -> None:
        """A cluster breakpoint was hit: stop at ``frame``'s current line, before it runs,
        once a client is ready (reason ``breakpoint``, as a ``breakpoint()``)."""
        record = record_for_frame(frame, cluster_breakpoint=True)
        self.returns.follow(record.id, threading.get_ident(), frame)
        under_client = self._wait_for_client(record)
        if under_client is not None:
            self.debugger.stop_here(frame, under_client=under_client)
            if not self._client_attached:
                # Resumed by a departing client: pydevd's tracing (which replaced ours
                # in every thread on 3.10/3.11) stays until the keeper removes it.
                self.breakpoints.reinstall()

    def pause_on_raised(self, frame: FrameType, exception: BaseException,
                        traceback: TracebackType | None) -> None:
        """The ``raised`` exception filter: ``exception`` was just raised in ``frame``; stop
        there (reason ``exception``) once a client is ready, the program goes on as if not
        stopped (the exception propagates or is caught)."""
        record = record_for_frame(frame, exception=exception)
        self.returns.follow(record.id, threading.get_ident(), frame)
        under_client = self._wait_for_client(record)
        if under_client is not None:
            self.debugger.stop_on_raised(frame, exception, traceback,
                                         under_client=under_client)
            if not self._client_attached:
                self.breakpoints.reinstall()  # as after pause_at_breakpoint

    def arm_breakpoints(self, breakpoints: dict[str, Any]) -> None:
        """The hub's ``ArmBreakpoints`` (on the link thread), or a Ray worker's setup hook:
        make them this process's cluster breakpoints (see :meth:`.arming.Arming.arm`)."""
        self.arming.arm(breakpoints)

    def _post_logpoint(self, text: str, frame: FrameType) -> None:
        task = live.current_activity().get("task_name")  # a Ray worker's process title
        # Kept until written: a line logged before the link's first connection (a Ray
        # worker armed from the cluster's KV runs its first task meanwhile) or during a
        # reconnection would be dropped with the stale session messages at the connect.
        self.link.post(LogpointOutput(text=text, path=frame.f_code.co_filename,
                                      line=frame.f_lineno, task=str(task or "")), keep=True)
        # The line is on the hub's connection before the user's next line runs: a process
        # may end without the interpreter's exit (a Ray worker once its job is done, ended
        # from C; os._exit), and then nothing sends what is still queued.
        if self.link.connected:
            self.link.wait_sent(LOGPOINT_SEND_WAIT)
        else:  # (a slow connection is not waited for twice)
            self._wait_unconnected_logpoints()

    def _wait_unconnected_logpoints(self) -> None:
        """No connection yet (or any more): wait for it to write the kept lines, within a
        budget for the whole process (a hub that never answers must not slow each hit by
        a second), and once more at the interpreter's exit."""
        if not self._logpoint_exit_wait:
            self._logpoint_exit_wait = True
            atexit.register(self.link.wait_kept_sent, LOGPOINT_SEND_WAIT)
        if self._unconnected_logpoint_budget <= 0:
            return
        started = time.monotonic()
        self.link.wait_kept_sent(min(LOGPOINT_SEND_WAIT, self._unconnected_logpoint_budget))
        self._unconnected_logpoint_budget -= time.monotonic() - started

    def _take_snapshot(self, frame: FrameType) -> None:
        from .snapshot_sender import send_point  # at the first snapshot point's hit

        send_point(frame, self.link)

    def _post_loaded(self, paths: list[str]) -> None:
        self.link.post(BreakpointsLoaded(paths=paths))

    def pause_on_exception(self, exc_info: ExcInfo) -> None:
        """Post-mortem: freeze in the frame that raised; return when the client resumes."""
        frame = innermost_frame(exc_info[1]) or sys._getframe(1)
        record = record_for_frame(frame, exception=exc_info[1])
        ident = threading.get_ident()
        with self._lock:
            self._raised_in[ident] = frame
        try:
            if self._wait_for_client(record) is not None:
                self.debugger.stop_on_exception(exc_info)
                self._end_thread_sessions(ident, END_RAISED)  # its id may be new
        finally:
            with self._lock:
                self._raised_in.pop(ident, None)

    def _wait_for_client(self, record: PausedThread) -> bool | None:
        """Register ``record`` and block until a client is ready; None if we gave up, True
        if a client was already attached and ready (the pause is new to it), else False."""
        # The hub link connects in the background while debugpy is imported and starts
        # listening (the slow part of a first pause): the session is listed sooner.
        began = time.monotonic()
        self.link.pause_reports_first_error = True
        self.link.start()
        ident = threading.get_ident()
        first = not self.debugger.started
        session = ParkedThread(record, ident, listed=not first)
        if self._hub_closed is not None:  # e.g. a loop's next breakpoint() while Ray stops
            say(f"session {record.id} paused at {pause_place(record)}, but the hub shut "
                f"down ({self._hub_closed}); continuing")
            self.returns.forget(record.id)
            return None
        with self._lock:
            self._pause_requests.pop(ident, None)  # this pause is the thread's session
            others = [s for s in self._sessions.values() if s.thread_ident == ident]
            self._sessions[record.id] = session  # first: the process never looks idle here
            here = sys._getframe()
            for other in others:  # this thread moved on: with what its function returned
                returned = self.returns.take_return(other.record.id, here)
                self._end_session_locked(other.record.id, END_MOVED, returned or "")
            if self._client_ready:
                session.released.set()
        if first:
            lister = threading.Timer(max(0.0, began + FIRST_LISTING_WAIT - time.monotonic()),
                                     self._list_session, (session,))
            mark_invisible(lister)
            lister.start()
        else:
            self.link.post(SessionStarted(session=record.to_dict()))
        try:
            self.debugger.ensure_started()
        except BaseException:
            self._end_session(record.id)  # never listed as paused when it cannot be debugged
            if (error := self.link.take_first_error()) is not None:
                say(f"{error}; retrying in the background (pid {os.getpid()})")
            raise
        finally:
            if first:
                lister.cancel()
        self._list_session(session)  # pydevd is ready: a client finds it so
        if session.run_on:
            # `raydebug continue` (or the hub's closing) came while pydevd started, seconds
            # on a loaded node: the session is over; stopping now would hold the thread in
            # pydevd, unlisted, for ever (a linked actor's method, seen under load).
            self._end_thread_sessions(ident)
            return None
        if session.released.is_set():
            # The attached client hears of this session from the hub (its control
            # connection) and of the stop from pydevd (the data connection): the session's
            # word leaves first, or a terminal showed the stop of another call without its
            # header (a test_terminal_running failure under load).
            self.link.wait_sent(SESSION_SEND_WAIT)
            return True
        timeout = self.config.wait_timeout
        limit = f" (RAYDEBUG_WAIT_TIMEOUT={timeout:g}s)" if timeout else ""
        # Say "waiting" only if a debugger can reach us: a wrong token or no hub at the
        # address is known after the first attempt (milliseconds; pydevd's start was longer).
        attempted = self.link.attempted.wait(FIRST_ATTEMPT_WAIT)
        if not attempted:  # a slow attempt: from now on the link says how it ends
            self.link.pause_reports_first_error = False
            attempted = self.link.attempted.is_set()  # it may have ended, unsaid, meanwhile
        # The first attempt's error, which the link left to us, else how they go now (the
        # link said each change of it).
        problem = self.link.take_first_error() or (self.link.last_error if attempted else None)
        if problem and problem != "lost":  # "lost": reconnecting to a hub that was there
            say(f"session {record.id} paused at {pause_place(record)}, but no debugger "
                f"can attach: {problem}; retrying, then continuing{limit}")
        else:
            say(waiting_notice(record, self.link.hub_address, limit))
        started = time.monotonic()
        if session.released.wait(timeout):
            if session.run_on:
                self._end_thread_sessions(ident)
                return None
            return False
        self._end_thread_sessions(ident, END_TIMEOUT)  # by thread: its id may have been renewed
        say(f"no debugger attached to session {record.id} within {time.monotonic() - started:.0f}s "
            f"(RAYDEBUG_WAIT_TIMEOUT); continuing")
        return None

    # -- fork ---------------------------------------------------------------------------------

    def abandon_after_fork(self) -> None:
        """In a fork child of this process: give up the parent's link and pydevd (the child
        makes an agent of its own). Nothing is sent: the connections are the parent's."""
        self.link.close_inherited()
        self.debugger.reset_after_fork()
        self.arming.forget_after_fork()

    # -- LinkOwner: called on the link thread -----------------------------------------------

    def registration(self) -> Register | None:
        return Register(process=live.process_record().to_dict()) if live.is_live() else None

    def collect_stacks(self, request: CollectStacks) -> ControlMessage:
        with fork_guard.importing():  # not at import: a breakpoint() needs no stacks
            from .stacks import collect_threads

        with self._lock:
            raised_in = dict(self._raised_in)
        threads = collect_threads(request.locals, raised_in) if request.frames else []
        return Stacks(request_id=request.request_id, threads=threads,
                      now=live.current_activity())

    def resume(self, request: Resume) -> ControlMessage:
        try:
            ended = self.resume_sessions()
        except RuntimeError as error:  # a client attached meanwhile: it holds the stops
            return Resumed(request_id=request.request_id, error=str(error))
        return Resumed(request_id=request.request_id, sessions=ended)

    def prepare_client(self) -> None:
        self.debugger.ensure_started()

    def serve_client(self, sock: socket.socket) -> None:
        self.debugger.serve_client(sock)


def _service_thread(thread: threading.Thread) -> bool:
    """Whether ``thread`` is one of the cluster's service threads, which a stop elsewhere in
    the process leaves running (:func:`.debugger.start.spare_threads`)."""
    return thread.name in live.service_threads()
