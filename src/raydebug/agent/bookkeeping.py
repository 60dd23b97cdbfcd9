"""The bookkeeping of this process's pauses: its sessions and pause requests, under one lock.

Each paused thread is a :class:`ParkedThread` (this process's side of a session), and each
thread ``raydebug pause`` asked and that has not stopped yet a pause request
(:mod:`.pause_requests`). What happens to them as pydevd reports threads stopping and
running, and as clients and hubs come and go, is here; every change the hub must know is
posted on the link. :class:`raydebug.agent.agent.Agent` builds on it.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from types import FrameType
from typing import TYPE_CHECKING

from ..protocol.control import END_RESUMED, END_RETURNED, SessionEnded, SessionStarted
from ..session import REASON_PAUSE, PausedThread, PauseRequestEvent, PauseRequestState
from .config import AgentConfig
from .link import live
from .metadata import came_back, record_for_frame
from .pause_requests import PauseRequest, pending_message
from .report import pause_place, say, waiting_notice

if TYPE_CHECKING:
    from .debugger.facade import Debugger
    from .debugger.returns import ReturnWatcher
    from .link.hub_link import HubLink


@dataclass
class ParkedThread:
    """This process's side of one session: the paused thread, parked until released."""

    record: PausedThread
    thread_ident: int
    released: threading.Event = field(default_factory=threading.Event)
    has_stopped: bool = False  # suspended in pydevd at least once since release
    run_on: bool = False  # released to run on: the hub went away for good, or said Resume
    listed: bool = True  # told to the hub (a first pause waits for pydevd's start: see Agent)


class Bookkeeping:
    """This process's sessions and pause requests, and what changes them. The agent sets
    :attr:`debugger`, :attr:`returns` and :attr:`link` (read at each use: a test gives its
    own)."""

    debugger: Debugger
    returns: ReturnWatcher
    link: HubLink

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

    # -- listing sessions ---------------------------------------------------------------------

    def _list_session(self, session: ParkedThread) -> None:
        """Tell the hub of ``session`` if it is not yet told and still on (once: from the
        pausing thread or the listing's timer, whichever comes first)."""
        with self._lock:
            if session.listed or self._sessions.get(session.record.id) is not session:
                return
            session.listed = True
            self.link.post(SessionStarted(session=session.record.to_dict()))

    # -- ending sessions ----------------------------------------------------------------------

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

    # -- pydevd's news: threads stopping and running ------------------------------------------

    def _on_thread_suspended(self, ident: int, frame: FrameType | None) -> None:
        self.returns.on_suspended(ident, frame)
        blocked = self.debugger.blocked.is_standing_in(ident)  # it is still in C
        returned = None  # the session of a thread back from C, stopped now
        with self._lock:
            request = self._pause_requests.get(ident)
            if (request is None and self._client_attached and frame is not None
                    and all(s.thread_ident != ident for s in self._sessions.values())):
                request = self._client_pause_first(ident)
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
            # Ended when its function returns, as a breakpoint()'s session: else a step off
            # its end goes on into the thread's next call (a Ray worker's next task).
            self.returns.follow(record.id, ident, frame)
            self.link.post(SessionStarted(session=record.to_dict()))
            attached = self._client_attached
        if attached:
            return  # the attached client shows it; this stderr may be that client's terminal
        # Said as a breakpoint() says it: the driver's log is where a user looks first.
        say(waiting_notice(record, self.link.hub_address))

    def _client_pause_first(self, ident: int) -> PauseRequest | None:
        """The request of the attached client's DAP ``pause`` for thread ``ident``, which
        pydevd suspended before the hub's word of that pause came (``Pause(by_client)``, on
        the control connection, which the data connection does not wait for): made now,
        or the thread was never listed (that word skips the threads suspended by then)."""
        thread = threading.current_thread()  # pydevd calls us on the suspending thread
        if thread.ident != ident or not self.debugger.stopped_for_a_pause(thread):
            return None
        request = self._pause_requests[ident] = PauseRequest(thread, live.session_identity())
        return request

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

    # -- the link's news: clients and hubs (on the link thread) -------------------------------

    def live_sessions(self) -> list[SessionStarted]:
        with self._lock:
            self._hub_closed = None  # connected: a hub is there again
            return [SessionStarted(session=s.record.to_dict()) for s in self._sessions.values()
                    if s.listed]

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
        thread would hold its Ray worker's lease until the node kills it): every paused thread
        runs on, the waiting ones released as if their wait had timed out, the ones
        suspended under a client resumed; so do later pauses, until a hub is there again."""
        with self._lock:
            self._hub_closed = reason or "closing"
            waiting = [s for s in self._sessions.values() if not s.released.is_set()]
            for session in waiting:
                session.run_on = True
                session.released.set()
            requested = bool(self._pause_requests)
            self._pause_requests.clear()  # never listed; the resume below cancels them
        suspended = self.debugger.suspended_threads()
        if waiting or suspended or requested:
            say(f"the hub at {self.link.hub_address} shut down ({self._hub_closed}); "
                "continuing")
        if suspended or requested:
            self.debugger.resume_all()

    def resume_sessions(self) -> list[str]:
        """``raydebug continue`` (the hub's ``Resume``, on the link thread): every paused
        thread runs on, the waiting ones released as if their wait had timed out, those
        suspended in pydevd resumed; each session is ended here, so its ``SessionEnded``
        is posted before the answer. Returns their ids. Raises ``RuntimeError`` when a
        client is attached (its stops are its to resume; the hub does not ask then)."""
        with self._lock:
            if self._client_attached:
                raise RuntimeError("a client is attached to this process")
            ended = list(self._sessions)
            waiting = [s for s in self._sessions.values() if not s.released.is_set()]
            for session in waiting:
                session.run_on = True
                session.released.set()
        if len(waiting) < len(ended):
            self.debugger.resume_all()
            # What pydevd queued for a client about these stops (no client came: a later
            # one is told of stops again) would never leave: its non-daemon CheckAliveThread
            # then held the process at its exit forever, Ctrl-C or not.
            self.debugger.forget_client()
        with self._lock:
            for session_id in ended:
                self._end_session_locked(session_id)
            self._forget_abandoned_pauses_locked()  # the resume cancelled those not met
        if ended:
            say(f"{len(ended)} paused thread{'s' if len(ended) != 1 else ''} continued "
                "(raydebug continue)")
        return ended

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
