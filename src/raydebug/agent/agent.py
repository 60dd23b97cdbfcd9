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
close). ``SessionEnded`` says which.

``raydebug pause`` asks pydevd to suspend every Python thread; a thread becomes a session
(reason ``pause``) only when it has suspended, at the frame it stopped in. Until then it is
*pause requested* (:mod:`.pause_requests`): not listed as a session, since a thread blocked
in C stops only when it returns to Python, and a client attached to it would wait for nothing;
the hub is told how many are pending. A request ends when its thread stops, when it is
withdrawn (``raydebug pause --cancel``, or its asker's wait is over), or when it is abandoned
(pydevd resumed everything for a departing client, the hub closed): never a session, it ends
with no ``SessionEnded``.

No pause is lost to a client that leaves: a pause that had not stopped under it, or that it
left no request to react to, stays paused and is registered with the hub again as waiting
(:meth:`Agent.on_client_detached`), so the next client gets it.
"""

from __future__ import annotations

import os
import socket
import sys
import threading
import time
from dataclasses import dataclass, field
from types import FrameType, TracebackType
from typing import TYPE_CHECKING, Any

from ..protocol.control import (
    END_MOVED,
    END_RAISED,
    END_RESUMED,
    END_RETURNED,
    END_TIMEOUT,
    BreakpointsLoaded,
    CancelPause,
    CollectStacks,
    ControlMessage,
    LogpointOutput,
    Pause,
    PauseCancelled,
    Paused,
    Register,
    SessionEnded,
    SessionStarted,
    Stacks,
)
from ..session import REASON_PAUSE, PausedThread, PauseRequestEvent, PauseRequestState
from . import fork_guard, pause_signal
from .config import AgentConfig
from .debugger.facade import Debugger, ExcInfo
from .debugger.returns import ReturnWatcher
from .link import live
from .link.hub_link import HubLink
from .metadata import came_back, innermost_frame, process_labels, ray_fields, record_for_frame
from .pause_requests import PauseRequest, expire_later, pending_message
from .report import pause_place, say

if TYPE_CHECKING:
    from .armed.breakpoints import ArmedBreakpoints

POST_MORTEM_VARIABLE = "RAYDEBUG_POST_MORTEM"
FIRST_ATTEMPT_WAIT = 2.0  # seconds: how long a pause waits to know if the hub can be reached


@dataclass
class ParkedThread:
    """This process's side of one session: the paused thread, parked until released."""

    record: PausedThread
    thread_ident: int
    released: threading.Event = field(default_factory=threading.Event)
    has_stopped: bool = False  # suspended in pydevd at least once since release
    hub_closed: bool = False  # released because the hub went away for good: run on


class Agent:
    """One per process; created on the first pause."""

    def __init__(self, config: AgentConfig) -> None:
        self.config = config
        self._lock = threading.Lock()
        self._sessions: dict[str, ParkedThread] = {}
        self._pause_requests: dict[int, PauseRequest] = {}  # thread ident -> its request
        # Threads frozen post-mortem -> the frame that raised: their stack to show.
        self._raised_in: dict[int, FrameType] = {}
        self._client_attached = False
        self._client_ready = False
        self._hub_closed: str | None = None  # why the hub went away for good, until a new one
        self._post_mortem_set = False  # RAYDEBUG_POST_MORTEM is ours (an IDE's filter)
        self._breakpoints: ArmedBreakpoints | None = None  # made by the first armed set
        self._breakpoints_lock = threading.Lock()
        self.debugger = Debugger(on_suspended=self._on_thread_suspended,
                                 on_resumed=self._on_thread_resumed,
                                 on_untraced=self._reinstall_armed)
        self.returns = ReturnWatcher(self.debugger.is_suspended, self._on_returned,
                                     self.debugger.returns_to_other_code,
                                     self.debugger.cancel_step)
        self.link = HubLink(config, self)
        pause_signal.serve(self.pause_blocked_main)

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
                        on_hit=self.pause_at_breakpoint, on_log=self._post_logpoint,
                        labels=lambda: {**process_labels(), **live.labels()},
                        remote_root=_remote_root, on_loaded=self._post_loaded,
                        standing_down=lambda: self._client_attached,
                        on_raised=self.pause_on_raised)
            return self._breakpoints

    def _reinstall_armed(self) -> None:
        """Put the armed set back (see :meth:`ArmedBreakpoints.reinstall`), if there is one."""
        if self._breakpoints is not None:
            self._breakpoints.reinstall()

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
        """The hub's ``ArmBreakpoints`` (on the link thread): make them this process's
        cluster breakpoints. A malformed set is said on stderr; the old one stays armed."""
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

    def _post_logpoint(self, text: str, frame: FrameType) -> None:
        task = live.current_activity().get("task_name")  # a Ray worker's process title
        self.link.post(LogpointOutput(text=text, path=frame.f_code.co_filename,
                                      line=frame.f_lineno, task=str(task or "")))

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
        self.link.pause_reports_first_error = True
        self.link.start()
        ident = threading.get_ident()
        session = ParkedThread(record, ident)
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
        self.link.post(SessionStarted(session=record.to_dict()))
        try:
            self.debugger.ensure_started()
        except BaseException:
            self._end_session(record.id)  # never listed as paused when it cannot be debugged
            if (error := self.link.take_first_error()) is not None:
                say(f"{error}; retrying in the background (pid {os.getpid()})")
            raise
        if session.released.is_set():
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
            say(f"session {record.id} paused at {pause_place(record)}, waiting for a "
                f"debugger (hub: {self.config.hub_address}){limit}")
        started = time.monotonic()
        if session.released.wait(timeout):
            if session.hub_closed:
                self._end_thread_sessions(ident)
                return None
            return False
        self._end_thread_sessions(ident, END_TIMEOUT)  # by thread: its id may have been renewed
        say(f"no debugger attached to session {record.id} within {time.monotonic() - started:.0f}s "
            f"(RAYDEBUG_WAIT_TIMEOUT); continuing")
        return None

    def pause_all_threads(self, expire: float = 0.0, by_client: bool = False) -> list[int]:
        """``raydebug pause``, on the link thread: ask pydevd to suspend every Python thread
        that has no session and no pause requested yet. ``by_client``: the attached client's
        DAP ``pause``, which asks every thread not suspended now (a session's thread it let
        run on too) and asks again those already asked (pydevd may have dropped an ask that
        came during a step's set-up).

        Starts pydevd first (~150 ms the first time). Each thread becomes a session (reason
        ``pause``) when it suspends (:meth:`_on_thread_suspended`), not before: one blocked
        in C suspends only when it returns to Python. No thread waits in raydebug for a
        client: a suspended thread with no client stays suspended, and the client that
        attaches is told of it (``replay_stops``). A thread that has not stopped within
        ``expire`` seconds (0: no limit) is no longer asked. Returns the idents of the
        threads asked; raises what pydevd's start raises.
        """
        self.debugger.ensure_started()
        with self._lock:
            self._forget_abandoned_pauses_locked()  # a thread asked again if a resume cancelled
            if by_client:
                busy = self.debugger.suspended_threads()
            else:
                busy = ({s.thread_ident for s in self._sessions.values()}
                        | set(self._pause_requests))
        targets = self.debugger.pausable_threads(skip=busy)
        identity = live.session_identity()
        asked_now = []
        with self._lock:
            for thread, _frame in targets:
                assert thread.ident is not None
                if thread.ident in self._pause_requests:
                    continue  # asked again (by_client): its request and its end stay
                request = self._pause_requests[thread.ident] = PauseRequest(thread, identity)
                asked_now.append(request)
            self.link.post(pending_message(self._pause_requests.values()))
        self.debugger.suspend_threads([thread for thread, _ in targets])
        if expire > 0 and asked_now:
            expire_later(expire, lambda: self.withdraw_pauses(asked_now,
                                                              PauseRequestEvent.EXPIRED))
        asked = [thread.ident for thread, _ in targets if thread.ident is not None]
        main = threading.main_thread().ident
        if main in asked:  # blocked in C, it would never stop: a signal brings it to Python
            pause_signal.kick_main_thread(lambda: self._still_asked(main))
        # Any thread still in C after a moment is served where it blocks: the main thread
        # once the signal has had its time (it may not interrupt the call, or be ignored).
        self.debugger.blocked.watch([thread for thread, _ in targets],
                                    lambda thread: self._still_asked(thread.ident))
        return asked

    def withdraw_pauses(self, only: list[PauseRequest] | None = None,
                        event: PauseRequestEvent = PauseRequestEvent.CANCELLED) -> int:
        """End the pause requests not met yet (``only`` those, if given) with ``event``
        (cancelled, expired), and take them back from pydevd: each thread runs on when it
        returns to Python. A cancel also lets go a thread served blocked in C (still
        pending: ``ps`` shows it): its stand-in leaves, its session ends; an expiry leaves
        it served. Returns how many were withdrawn."""
        with self._lock:
            ended = [(ident, request) for ident, request in self._pause_requests.items()
                     if (only is None or any(request is mine for mine in only))
                     and (not self.debugger.is_suspended(ident)
                          or (request.state is PauseRequestState.BLOCKED
                              and event is PauseRequestEvent.CANCELLED))]
            for ident, request in ended:
                del self._pause_requests[ident]
                request.move(event)
            if ended:
                self.link.post(pending_message(self._pause_requests.values()))
        if ended:
            self.debugger.withdraw_pause([request.thread for _, request in ended])
        return len(ended)

    def _still_asked(self, ident: int | None) -> bool:
        """Whether thread ``ident`` is asked to pause and has not stopped yet."""
        with self._lock:
            request = self._pause_requests.get(ident or 0)
        return request is not None and not self.debugger.is_suspended(ident or 0)

    def pause_blocked_main(self, frame: FrameType) -> None:
        """On the main thread, in raydebug's signal handler (:mod:`.pause_signal`): if its
        pause is still asked, stop it in ``frame``, the user's frame that was blocked in C;
        block until resumed. It stops in the user's frame that called the library code
        blocked (``Event.wait()``), where the session is made as any pause's."""
        ident = threading.get_ident()  # no threading.py here: pydevd may trace it (stop_paused)
        with self._lock:
            request = self._pause_requests.get(ident)
        if request is None or self.debugger.is_suspended(ident):
            return  # it stopped meanwhile, or its request ended
        if not self.debugger.blocked.claim_own_stop(ident):
            return  # a stand-in serves it where it blocks (the signal came late)
        try:
            self.debugger.stop_paused(request.thread, frame, under_client=self._client_ready)
        finally:
            self.debugger.blocked.end_own_stop(ident)

    # -- session bookkeeping ----------------------------------------------------------------

    def _end_thread_sessions(self, ident: int, reason: str = END_RESUMED) -> None:
        with self._lock:
            for session in [s for s in self._sessions.values() if s.thread_ident == ident]:
                self._end_session_locked(session.record.id, reason)

    def _end_session(self, session_id: str, reason: str = END_RESUMED,
                     returned: str = "") -> None:
        with self._lock:
            self._end_session_locked(session_id, reason, returned)

    def _end_session_locked(self, session_id: str, reason: str = END_RESUMED,
                            returned: str = "") -> None:
        self.returns.forget(session_id)
        if self._sessions.pop(session_id, None) is not None:
            self.link.post(SessionEnded(session_id=session_id, reason=reason,
                                        returned=returned))
            self.debugger.reconsider_tracing()

    def _on_thread_suspended(self, ident: int, frame: FrameType | None) -> None:
        self.returns.on_suspended(ident, frame)
        blocked = self.debugger.blocked.is_standing_in(ident)  # it is still in C
        returned = None  # the session of a thread back from C, stopped now
        with self._lock:
            request = self._pause_requests.get(ident)
            if request is not None:
                if blocked:  # listed, and still asked: it stops when it returns
                    request.move(PauseRequestEvent.REPORTED_BLOCKED)
                else:
                    del self._pause_requests[ident]
                    request.move(PauseRequestEvent.THREAD_STOPPED)
                self.link.post(pending_message(self._pause_requests.values()))
            known = False
            for session in self._sessions.values():
                if session.thread_ident == ident:
                    session.has_stopped = True
                    known = True
                    if session.record.blocked_in_c and not blocked and frame is not None:
                        session.record = returned = came_back(session.record, frame)
                        self.link.post(SessionStarted(session=session.record.to_dict()))
            if request is None or known or frame is None:
                if returned is not None:  # a pause that has stopped: said, as every one
                    say(f"session {returned.id}: its call returned; paused at "
                        f"{pause_place(returned)}")
                return  # a stop of a session the hub knows (a pause of it stops there too)
            # The requested pause has happened: now it is a session, where it stopped.
            record = record_for_frame(frame, reason=REASON_PAUSE, thread=request.thread,
                                      identity=request.identity, blocked_in_c=blocked)
            session = ParkedThread(record, ident, has_stopped=True)
            session.released.set()  # nothing waits in raydebug: pydevd holds it
            self._sessions[record.id] = session
            self.link.post(SessionStarted(session=record.to_dict()))
        # Said as a breakpoint() says it: the driver's log is where a user looks first.
        say(f"session {record.id} paused at {pause_place(record)}, waiting for a debugger "
            f"(hub: {self.config.hub_address})")

    def _forget_abandoned_pauses_locked(self) -> None:
        """Forget the pause requests pydevd no longer holds (a resume of every thread
        cancelled them, or the thread ended): never listed, they end without a word to
        the hub."""
        abandoned = [ident for ident, request in self._pause_requests.items()
                     if not (request.thread.is_alive()
                             and self.debugger.is_asked_to_pause(request.thread))]
        for ident in abandoned:
            self._pause_requests.pop(ident).move(PauseRequestEvent.CANCELLED)
        if abandoned:
            self.link.post(pending_message(self._pause_requests.values()))

    def _on_thread_resumed(self, ident: int) -> None:
        if self.debugger.blocked.is_handing_over(ident):
            return  # back from C: it stops on its own now, the same session
        with self._lock:
            request = self._pause_requests.get(ident)
            if request is not None and request.state is PauseRequestState.BLOCKED:
                # Let go while still in C (continue, a resume of all): it will not stop.
                del self._pause_requests[ident]
                request.move(PauseRequestEvent.CANCELLED)
                self.link.post(pending_message(self._pause_requests.values()))
            if self._client_attached:
                # Stepping or continuing under a client: the session goes on, until its
                # function returns.
                self.returns.on_resumed(ident)
                return
            for session in [s for s in self._sessions.values() if s.thread_ident == ident]:
                self._end_session_locked(session.record.id)

    # -- fork ---------------------------------------------------------------------------------

    def abandon_after_fork(self) -> None:
        """In a fork child of this process: give up the parent's link and pydevd (the child
        makes an agent of its own). Nothing is sent: the connections are the parent's."""
        self.link.close_inherited()
        self.debugger.reset_after_fork()
        # The parent's armed callbacks would pause through this abandoned agent: the
        # child's own agent arms the cluster's set when its link connects.
        if self._breakpoints is not None:
            self._breakpoints.forget_after_fork()

    # -- LinkHandler: called on the link thread ---------------------------------------------

    def registration(self) -> Register | None:
        return Register(process=live.process_record()) if live.is_live() else None

    def collect_stacks(self, request: CollectStacks) -> ControlMessage:
        with fork_guard.importing():  # not at import: a breakpoint() needs no stacks
            from .stacks import collect_threads

        with self._lock:
            raised_in = dict(self._raised_in)
        threads = collect_threads(request.locals, raised_in) if request.frames else []
        return Stacks(request_id=request.request_id, threads=threads,
                      now=live.current_activity())

    def pause(self, request: Pause) -> ControlMessage:
        try:
            self.pause_all_threads(expire=request.expire_ms / 1000,
                                   by_client=request.by_client)
        except Exception as error:  # the process runs on, unpaused; the client is told why
            reason = f"the debugger could not start in pid {os.getpid()}: " \
                     f"{type(error).__name__}: {error}"
            say(reason)
            return Paused(request_id=request.request_id, error=reason)
        return Paused(request_id=request.request_id)

    def cancel_pause(self, request: CancelPause) -> ControlMessage:
        return PauseCancelled(request_id=request.request_id, threads=self.withdraw_pauses())

    def live_sessions(self) -> list[SessionStarted]:
        with self._lock:
            self._hub_closed = None  # connected: a hub is there again
            return [SessionStarted(session=s.record.to_dict()) for s in self._sessions.values()]

    def prepare_client(self) -> None:
        self.debugger.ensure_started()

    def serve_client(self, sock: socket.socket) -> None:
        self.debugger.serve_client(sock)

    def on_client_attached(self) -> None:
        with self._lock:
            self._client_attached = True

    def on_client_ready(self) -> None:
        # Snapshot the already-suspended threads *before* releasing the waiting ones, so a
        # released thread that suspends quickly is not announced twice.
        suspended = self.debugger.suspended_threads()
        with self._lock:
            self._client_ready = True
            for session in self._sessions.values():
                session.released.set()
        self.debugger.replay_stops(suspended)

    def on_hub_closing(self, reason: str) -> None:
        """The hub goes away for good (``HubClosing``: its Ray node is stopping, and a paused
        thread would hold its worker's lease until the node kills it): every paused thread
        runs on, the waiting ones released as if their wait had timed out, the ones
        suspended under a client resumed; so do later pauses, until a hub is there again."""
        with self._lock:
            self._hub_closed = reason or "closing"
            waiting = [s for s in self._sessions.values() if not s.released.is_set()]
            for session in waiting:
                session.hub_closed = True
                session.released.set()
            requested = bool(self._pause_requests)
            self._pause_requests.clear()  # never listed; the resume below cancels them
        suspended = self.debugger.suspended_threads()
        if waiting or suspended or requested:
            say(f"the hub at {self.link.hub_address} shut down ({self._hub_closed}); "
                "continuing")
        if suspended or requested:
            self.debugger.resume_all()

    def _on_returned(self, session_id: str, returned: str) -> None:
        self._end_session(session_id, END_RETURNED, returned)

    def on_client_detached(self) -> None:
        self.returns.stop_watching()
        self.debugger.forget_client()
        held_over, disconnected = self.debugger.take_held_over()
        with self._lock:
            self._client_attached = False
            self._client_ready = False
            # A pause asks no thread to wait for a later client: pydevd's resume (continue,
            # disconnect) cancelled the stop of a thread still in C.
            self._forget_abandoned_pauses_locked()
            for session in list(self._sessions.values()):
                # A disconnect made the hub end every session it knew of this process; a
                # pause that had not stopped under the client yet is not over.
                if session.record.reason == REASON_PAUSE and not self.debugger.is_suspended(
                        session.thread_ident):
                    self._end_session_locked(session.record.id)  # it stopped and ran on
                    continue
                if session.thread_ident in held_over or (disconnected
                                                         and not session.has_stopped):
                    self._renew_locked(session)
                    continue
                ran_on = session.has_stopped and not self.debugger.is_suspended(
                    session.thread_ident)
                if ran_on:
                    self._end_session_locked(session.record.id)
        self.debugger.reconsider_tracing()

    def _renew_locked(self, session: ParkedThread) -> None:
        """List again, as waiting, a pause the departing client did not take.

        The hub ends every session of the process that it saw when the client sent
        ``disconnect`` (it expects pydevd to resume them all), in the same step as it sends
        us ``ClientGone``: registering the session again after that keeps it listed.
        """
        self.link.post(SessionStarted(session=session.record.to_dict()))


def _remote_root() -> str | None:
    """Where Ray's working_dir is on this node, if this process runs in one."""
    root = ray_fields().get("remote_root")
    return root if isinstance(root, str) else None
