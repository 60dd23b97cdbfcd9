"""Threads blocked in C that a pause asked to stop: debuggable now, not when they return.

Theory of operation. ``raydebug pause`` asks pydevd to suspend every thread; one blocked in C
(``Event.wait``, ``queue.get``, a lock, a socket) suspends only when it returns to Python,
which may be never. pydevd serves a suspended thread's requests (``stackTrace``,
``variables``, ``evaluate``) on that thread, from inside its wait loop
(``do_wait_suspend``). So for each such thread a raydebug thread, the *stand-in*, enters that
wait loop on its behalf: with the blocked thread's pydevd id (its requests come to the
stand-in), a view of the thread (:class:`_BlockedView`) and the thread's innermost user frame
as where it stopped. For pydevd, and for every client, the blocked thread is then suspended
(reason ``pause``): its frames and locals are read, and ``evaluate`` runs on the stand-in in
the blocked frame's globals and locals, so ``done.set()`` can unblock it.

    blocked --continue-----------------> pydevd lets the thread run on: it returns unstopped
    blocked --returns to Python--------> the stand-in leaves; the thread stops itself (its
                                         pause is still asked), at the user's frame
    blocked --next/stepIn/stepOut/goto-> refused (:data:`STEP_REFUSED`): nothing to step

Only a thread that runs the user's code is served: one whose stack has no frame of it (a
thread of Ray's or of a library, e.g. Ray's ``PythonGCThread`` in its ``Event.wait``) is
let go instead (its pause withdrawn, as ``raydebug pause --cancel`` does): it has nothing to
show (pydevd leaves library frames out) and is no session, though ``threads`` and
``stacks`` still list it (:func:`where_served`). The main thread is served all the same: a
pause of a process stops it, even between a Ray worker's tasks.

The main thread is first sent raydebug's signal (:mod:`.pause_signal`), which brings most
blocking calls back to Python; one the signal does not interrupt (a C extension that waits
again on ``EINTR``, e.g. on a condition variable; a program that took or ignores the signal)
is served by a stand-in too, once :data:`MAIN_GRACE` has passed with no stop of its own
(:meth:`BlockedThreads.claim_own_stop` keeps the two from both serving it).

The stand-in leaves pydevd's loop without changing the thread's state (the view's
``pydev_state`` reads "running" once the thread has come back), so the thread's own stop
follows with nothing lost. Library frames between the C call and the user's frame (e.g.
``threading.py``) are run through: the thread stops at the user's frame, the line after the
blocking call.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable
from types import FrameType
from typing import Any

from .start import mark_invisible

BLOCKED_GRACE = 0.3  # seconds a thread asked to pause has to stop before it counts as blocked
# Seconds the main thread has, from the ask, to stop on its own: the signal is sent at
# pause_signal.KICK_AFTER (0.2 s); its handler runs within milliseconds of it in most calls,
# but only at Ray's next check of signals in ray.get (every 1 s by default).
MAIN_GRACE = 1.5
STEP_REFUSED = ("the thread is blocked in C (e.g. a lock, Event.wait, queue.get, a socket): "
                "it cannot step until it returns to Python; evaluate something that unblocks "
                "it, or continue")
_STEP_REQUESTS = ("on_next_request", "on_stepin_request", "on_stepout_request",
                  "on_goto_request")


class _BlockedView:
    """The blocked thread as its stand-in shows it to pydevd: the thread itself, except its
    ``additional_info``, which reads as running once the stand-in must leave."""

    def __init__(self, thread: threading.Thread, leave: threading.Event) -> None:
        self.__dict__["_thread"] = thread
        self.__dict__["additional_info"] = _InfoView(thread.additional_info,  # type: ignore[attr-defined]
                                                     leave)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.__dict__["_thread"], name)

    def __setattr__(self, name: str, value: Any) -> None:
        setattr(self.__dict__["_thread"], name, value)


class _InfoView:
    """pydevd's per-thread state of the blocked thread; its ``pydev_state`` is "running"
    once ``leave`` is set (the stand-in's wait loop ends), whatever the thread's is."""

    def __init__(self, info: Any, leave: threading.Event) -> None:
        self.__dict__["_info"] = info
        self.__dict__["_leave"] = leave

    def __getattr__(self, name: str) -> Any:
        if name == "pydev_state" and self.__dict__["_leave"].is_set():
            from _pydevd_bundle.pydevd_constants import STATE_RUN

            return STATE_RUN
        return getattr(self.__dict__["_info"], name)

    def __setattr__(self, name: str, value: Any) -> None:
        setattr(self.__dict__["_info"], name, value)


class _StandIn:
    """One blocked thread served by one raydebug thread."""

    def __init__(self, thread: threading.Thread, frame: FrameType) -> None:
        self.thread = thread
        self.frame = frame  # the innermost user frame: where the session shows it
        self.leave = threading.Event()  # the thread came back: leave pydevd's loop
        self.left = threading.Event()
        self.runner: threading.Thread | None = None


def where_served(top: FrameType, user_frame: Callable[[FrameType], FrameType | None],
                 is_main: bool) -> FrameType | None:
    """Where a stand-in shows a thread blocked in C whose innermost frame is ``top``: the
    innermost frame of the user's code (``user_frame``), below the library frames that
    block (``threading.py``'s); for the main thread with none, ``top`` itself (a Ray worker
    between tasks: its session says it runs no task). None for another thread with none:
    it runs library code only (Ray's ``PythonGCThread``), and is not served."""
    frame = user_frame(top)
    if frame is None and is_main:
        return top
    return frame


class BlockedThreads:
    """The process's stand-ins. Thread-safe.

    ``user_frame(frame)``: the innermost frame of the user's code from ``frame`` outwards
    (a blocked session shows it first: ``threading.py``'s frames are below the user's line),
    or None if no frame of that stack is the user's.
    """

    def __init__(self, user_frame: Callable[[FrameType], FrameType | None]) -> None:
        self._user_frame = user_frame
        self._lock = threading.Lock()
        self._stand_ins: dict[int, _StandIn] = {}  # blocked thread's ident -> its stand-in
        self._stopping_itself: set[int] = set()  # threads in their own stop: no stand-in
        self._py_db: Any = None
        self._restore: list[tuple[Any, str, Any]] = []  # see restore_after_fork

    def install(self, py_db: Any) -> None:
        """Wrap pydevd (started) so a returning thread takes over from its stand-in, and
        step requests for a blocked thread are refused; idempotent."""
        if self._py_db is py_db:
            return
        self._py_db = py_db
        _wrap_wait(py_db, self._before_own_stop)
        self._restore = _refuse_steps(self._blocked_pydevd_ids)

    def restore_after_fork(self) -> None:
        """In a fork child: put back pydevd's step handlers (class attributes, which outlive
        this object there; the child's own debugger wraps the originals)."""
        for owner, name, original in self._restore:
            setattr(owner, name, original)
        self._restore = []

    def watch(self, threads: list[threading.Thread],
              is_still_asked: Callable[[threading.Thread], bool],
              let_go: Callable[[threading.Thread], object]) -> None:
        """After a pause asked ``threads`` to stop: on a thread of ours, wait
        :data:`BLOCKED_GRACE` (the main thread: :data:`MAIN_GRACE`), then stand in for each
        one whose pause is still pending (``is_still_asked``: not stopped, not cancelled)
        and that is not stopping itself; ``let_go(thread)`` instead for one that runs
        library code only (:func:`where_served`). Returns at once."""
        waiter = threading.Thread(target=self._stand_in_for_late,
                                  args=(threads, is_still_asked, let_go),
                                  name="raydebug-blocked-watch", daemon=True)
        mark_invisible(waiter)
        waiter.start()

    def claim_own_stop(self, ident: int) -> bool:
        """Thread ``ident`` (the main thread, in raydebug's signal handler) is about to stop
        itself: True, and no stand-in is made for it until :meth:`end_own_stop`; False if
        a stand-in serves it already (it must not stop a second time)."""
        with self._lock:
            if ident in self._stand_ins or ident in self._stopping_itself:
                return False
            self._stopping_itself.add(ident)
            return True

    def end_own_stop(self, ident: int) -> None:
        """Thread ``ident``'s own stop (:meth:`claim_own_stop`) has ended."""
        with self._lock:
            self._stopping_itself.discard(ident)

    def is_standing_in(self, ident: int) -> bool:
        """Whether the calling thread is the stand-in of thread ``ident`` (the suspension
        pydevd reports now is the blocked thread's, seen from its stand-in)."""
        with self._lock:
            stand_in = self._stand_ins.get(ident)
        return stand_in is not None and stand_in.runner is threading.current_thread()

    def is_handing_over(self, ident: int) -> bool:
        """Whether thread ``ident`` came back from C and its stand-in is leaving: the
        suspension that ends now is followed by the thread's own, not a resume."""
        with self._lock:
            stand_in = self._stand_ins.get(ident)
        return stand_in is not None and stand_in.leave.is_set()

    # -- internals -----------------------------------------------------------------------

    def _stand_in_for_late(self, threads: list[threading.Thread],
                           is_still_asked: Callable[[threading.Thread], bool],
                           let_go: Callable[[threading.Thread], object]) -> None:
        main = threading.main_thread()
        others = [thread for thread in threads if thread is not main]
        threading.Event().wait(BLOCKED_GRACE)  # a running thread stops within it
        self._stand_in_for_each(others, is_still_asked, let_go)
        if len(others) < len(threads):
            # The signal's time: the main thread it brought back to Python stops itself.
            threading.Event().wait(MAIN_GRACE - BLOCKED_GRACE)
            self._stand_in_for_each([main], is_still_asked, let_go)

    def _stand_in_for_each(self, threads: list[threading.Thread],
                           is_still_asked: Callable[[threading.Thread], bool],
                           let_go: Callable[[threading.Thread], object]) -> None:
        frames = sys._current_frames()
        main = threading.main_thread()
        for thread in threads:
            top = frames.get(thread.ident or 0)
            if top is None or not is_still_asked(thread):
                continue  # ended, or stopped, or no longer asked
            frame = where_served(top, self._user_frame, thread is main)
            if frame is None:
                let_go(thread)  # library code only: nothing of the user's to show
                continue
            stand_in = _StandIn(thread, frame)
            with self._lock:
                if thread.ident in self._stand_ins or thread.ident in self._stopping_itself:
                    continue
                self._stand_ins[thread.ident or 0] = stand_in
            runner = threading.Thread(target=self._serve, args=(stand_in,),
                                      name=f"raydebug-stand-in-{thread.name}", daemon=True)
            mark_invisible(runner)
            from _pydevd_bundle.pydevd_constants import get_thread_id

            # pydevd routes a thread's requests by the current thread's pydevd id
            runner.__pydevd_id__ = get_thread_id(thread)  # type: ignore[attr-defined]
            stand_in.runner = runner
            runner.start()

    def _serve(self, stand_in: _StandIn) -> None:
        try:
            self._py_db.do_wait_suspend(_BlockedView(stand_in.thread, stand_in.leave),
                                        stand_in.frame, "line", None)
        finally:
            with self._lock:
                if self._stand_ins.get(stand_in.thread.ident or 0) is stand_in:
                    del self._stand_ins[stand_in.thread.ident or 0]
            stand_in.left.set()

    def _before_own_stop(self, thread: Any, frame: FrameType) -> bool:
        """A thread is about to suspend in pydevd: if it has a stand-in, it came back from
        C. Returns False to skip this stop (a library frame on the way back to the user's
        frame); else the stand-in has left and the thread stops."""
        if isinstance(thread, _BlockedView):
            return True
        with self._lock:
            stand_in = self._stand_ins.get(getattr(thread, "ident", None) or 0)
        if stand_in is None or stand_in.runner is threading.current_thread():
            return True
        if frame is not stand_in.frame and self._user_frame(frame) is stand_in.frame:
            return False  # in the library it called: stop in the user's frame, next line
        stand_in.leave.set()
        self._wake(thread)
        stand_in.left.wait()
        # Counted as a new pause, as set_suspend counts one: pydevd then tells the client of
        # this stop (it tells of a pause's stops once, and it told of the stand-in's). Not
        # set_suspend itself: in pydevd's single-notification mode it suspends every other
        # thread too, and the client may have let some run on meanwhile.
        notification = self._py_db._threads_suspended_single_notification
        notification.increment_suspend_time()
        notification.on_pause()
        return True

    def _wake(self, thread: threading.Thread) -> None:
        from _pydevd_bundle.pydevd_constants import get_thread_id

        _queue, event = self._py_db.get_internal_queue_and_event(get_thread_id(thread))
        event.set()

    def _blocked_pydevd_ids(self) -> set[str]:
        from _pydevd_bundle.pydevd_constants import get_thread_id

        with self._lock:
            return {get_thread_id(s.thread) for s in self._stand_ins.values()
                    if not s.leave.is_set()}


def _wrap_wait(py_db: Any, before: Callable[[Any, FrameType], bool]) -> None:
    original = py_db.do_wait_suspend

    def do_wait_suspend(thread: Any, frame: FrameType, *args: Any, **kwargs: Any) -> Any:
        if not before(thread, frame):
            return None
        return original(thread, frame, *args, **kwargs)

    py_db.do_wait_suspend = do_wait_suspend


def _refuse_steps(blocked_ids: Callable[[], set[str]]) -> list[tuple[Any, str, Any]]:
    """Answer a step request for a blocked thread with :data:`STEP_REFUSED` (pydevd would
    accept it, and the thread would step from wherever it comes back); returns what was
    replaced, as (owner, name, original)."""
    from _pydevd_bundle._debug_adapter import pydevd_base_schema
    from _pydevd_bundle.pydevd_comm_constants import CMD_RETURN
    from _pydevd_bundle.pydevd_net_command import NetCommand
    from _pydevd_bundle.pydevd_process_net_command_json import PyDevJsonCommandProcessor

    replaced = []
    for name in _STEP_REQUESTS:
        original = getattr(PyDevJsonCommandProcessor, name)
        replaced.append((PyDevJsonCommandProcessor, name, original))

        def refusing(processor: Any, py_db: Any, request: Any, *args: Any,
                     _original: Any = original, **kwargs: Any) -> Any:
            if getattr(request.arguments, "threadId", None) in blocked_ids():
                response = pydevd_base_schema.build_response(
                    request, kwargs={"success": False, "message": STEP_REFUSED})
                return NetCommand(CMD_RETURN, 0, response, is_json=True)
            return _original(processor, py_db, request, *args, **kwargs)

        setattr(PyDevJsonCommandProcessor, name, refusing)
    return replaced
