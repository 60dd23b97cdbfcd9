"""``raydebug pause`` in this process (and a client's DAP ``pause``): every thread asked.

Theory of operation. On the link thread, pydevd is started and asked to suspend every Python
thread. A thread becomes a session (reason ``pause``) only when it has suspended, at the
frame it stopped in (:meth:`.bookkeeping.Bookkeeping._on_thread_suspended`). Until then it is
*pause requested* (:mod:`.pause_requests`): not listed as a session, since a thread blocked
in C stops only when it returns to Python, and a client attached to it would wait for
nothing; the hub is told how many are pending. A main thread blocked in C is brought back to
Python by a signal (:mod:`.pause_signal`); another thread still in C after a moment is served
where it blocks if its stack has a frame of the user's code, else let go (its request
withdrawn): a thread of Ray's or of a library is never a session of its own. A request ends
when its thread stops, when it is withdrawn (``raydebug pause --cancel``, or its asker's wait
is over), or when it is abandoned (pydevd resumed everything for a departing client, the hub
closed): never a session, it ends with no ``SessionEnded``.
"""

from __future__ import annotations

import os
import threading
from types import FrameType

from ..protocol.control import CancelPause, ControlMessage, Pause, PauseCancelled, Paused
from ..session import PauseRequestEvent, PauseRequestState
from . import pause_signal
from .bookkeeping import Bookkeeping
from .link import live
from .pause_requests import PauseRequest, expire_later, pending_message
from .report import say


class PauseAll(Bookkeeping):
    """What the agent does for ``raydebug pause`` and a client's DAP ``pause``."""

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
        # One that runs library code only (Ray's PythonGCThread) is let go instead.
        self.debugger.blocked.watch([thread for thread, _ in targets],
                                    lambda thread: self._still_asked(thread.ident),
                                    self._let_go_library_thread)
        return asked

    def _let_go_library_thread(self, thread: threading.Thread) -> None:
        """Thread ``thread``, asked to pause, is still in C where no frame of its stack is
        the user's code (a thread of Ray's or of a library: Ray's ``PythonGCThread`` in its
        ``Event.wait``): no session, it would show nothing (pydevd leaves library frames
        out), and a client would be moved to it. Its pause is withdrawn, as ``--cancel``
        withdraws one: it runs on when it returns, untraced; ``stacks`` still shows it."""
        with self._lock:
            request = self._pause_requests.get(thread.ident or 0)
        if request is not None:
            self.withdraw_pauses([request])

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

    # -- the hub's requests (on the link thread) ----------------------------------------------

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
