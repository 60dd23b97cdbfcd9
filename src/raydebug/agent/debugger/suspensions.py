"""Which threads pydevd holds suspended, and which pauses a departing client must leave.

Theory of operation. pydevd offers no notification when a thread suspends or resumes, so
:meth:`Suspensions.watch` wraps the debugger's ``do_wait_suspend`` (every stop of every
thread goes through it, from the Cython tracer, the sys.monitoring tracer and post-mortem
alike) to keep the set of suspended threads and report each suspension and resumption.
The same wrapper works around a pydevd bug that delays every ``next`` by up to pydevd's
``TIMEOUT_SLOW`` in a process with other threads (:class:`_AlsoWake`,
docs/design.md#stepping-bug).

A pause handed to pydevd is not lost to a resume that races it
(:meth:`Suspensions.hold_unanswered_stops`): a thread told to stop that has not suspended
yet, or one that stopped for a pause its client had no request to react to, stays suspended
through ``disconnect``; the agent lists it again (:meth:`Suspensions.take_held_over`) and the
next client is told of it. The bookkeeping is this object's, under its own lock; it never
calls out while holding it.
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable
from types import FrameType
from typing import Any

PENDING_SECONDS = 2.0  # see Suspensions._pending_now

# What a stop needs of pydevd's tracing (see Suspensions.tracing_need and tracing_keeper).
SUSPENDED = "a thread is suspended"
ABOUT_TO_STOP = "a thread is about to stop"


class Suspensions:
    """The process's suspended threads and held-over pauses. Thread-safe."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._suspended: set[int] = set()  # thread idents inside do_wait_suspend
        # Pauses handed to pydevd that a departing client must not take with it (see
        # hold_unanswered_stops): threads told to stop that have not suspended yet, threads
        # that stopped for a pause while a client was attached, with the client's request
        # count at that stop, and the threads the last disconnect left suspended.
        # ident -> when it was told to stop, and the frame it is to stop in (None: any)
        self._pending: dict[int, tuple[float, FrameType | None]] = {}
        self._fresh: set[int] = set()
        self._stopped_at: dict[int, int] = {}
        self._requests = 0
        self._held_over: set[int] = set()
        self._disconnected = False  # the client sent disconnect; no new client yet
        # While pydevd carries out a disconnect: the threads its resume of every thread must
        # skip (see begin_disconnect).
        self._disconnecting = False
        self._holding: set[int] = set()
        self._restore: list[tuple[Any, str, Any]] = []  # see restore_after_fork

    # -- what the debugger tells us --------------------------------------------------------

    def about_to_stop(self, ident: int, under_client: bool = False,
                      frame: FrameType | None = None) -> None:
        """Thread ``ident`` is told to stop (``under_client``: for a pause new to an attached
        client; ``frame``: where it is to stop); no resume cancels it before it suspends."""
        with self._lock:
            self._pending[ident] = (time.monotonic(), frame)
            if under_client:
                self._fresh.add(ident)

    def new_client(self) -> None:
        """A client takes over: what the previous one left is no longer held for it."""
        with self._lock:
            self._disconnected = False
            self._held_over = set()

    def suspending(self, ident: int) -> None:
        """Thread ``ident`` suspends in pydevd (its stop is made)."""
        with self._lock:
            self._suspended.add(ident)
            self._pending.pop(ident, None)
            self._stopped_at[ident] = self._requests
            if self._disconnected:  # stopped after its client said goodbye: not its
                self._held_over.add(ident)
            if self._disconnecting:  # ... or while pydevd carries the goodbye out
                self._holding.add(ident)

    def request_arrives(self) -> None:
        """A client request is about to go to pydevd (counted: see begin_disconnect)."""
        with self._lock:
            self._requests += 1

    def resuming(self, ident: int) -> None:
        """Thread ``ident`` runs again."""
        with self._lock:
            self._suspended.discard(ident)
            self._fresh.discard(ident)
            self._stopped_at.pop(ident, None)

    # -- what others ask ---------------------------------------------------------------------

    def is_suspended(self, thread_ident: int) -> bool:
        with self._lock:
            return thread_ident in self._suspended

    def suspended_threads(self) -> set[int]:
        with self._lock:
            return set(self._suspended)

    def tracing_need(self) -> str | None:
        """:data:`SUSPENDED`, :data:`ABOUT_TO_STOP`, or None when no thread is either."""
        with self._lock:
            if self._suspended:
                return SUSPENDED
            if self._pending_now():
                return ABOUT_TO_STOP
        return None

    def take_held_over(self) -> tuple[set[int], bool]:
        """After a client left: the threads whose pause it did not take (told to stop but
        not yet suspended, kept suspended by its disconnect, or suspended after it: see
        hold_unanswered_stops), and whether it sent ``disconnect``. Each call returns
        them once."""
        with self._lock:
            held = self._held_over | self._pending_now()
            self._held_over = set()
            return held, self._disconnected

    def _pending_now(self) -> set[int]:
        """Threads told to stop that have not suspended yet (lock held). A stop that has not
        happened within PENDING_SECONDS never will (e.g. ``breakpoint()`` on a function's
        last line, stepping out into code pydevd skips): forgotten, or the process would
        stay traced, and that thread unresumable, for good."""
        now = time.monotonic()
        expired = [ident for ident, (since, _) in self._pending.items()
                   if now - since > PENDING_SECONDS]
        if expired:
            # A thread still in the frame it is to stop in has not missed its stop, only been
            # slow to reach it (under load that can take longer: docs/design.md#tracing-keeper):
            # keep it. Gone from the frame: forget it.
            stacks = sys._current_frames()
            for ident in expired:
                if not _on_stack(self._pending[ident][1], stacks.get(ident)):
                    del self._pending[ident]
        return set(self._pending)

    # -- pydevd's patches ----------------------------------------------------------------------

    def watch(self, py_db: Any, on_suspended: Callable[[int, FrameType | None], None],
              on_resumed: Callable[[int], None]) -> None:
        """Track suspended threads, and wake all of them whenever pydevd wakes one.

        ``on_suspended(ident, frame)`` runs on the thread as it suspends, ``on_resumed(ident)``
        as it runs again; neither under this object's lock.

        pydevd bug (docs/design.md#stepping-bug): ``_update_stepping_info`` wakes the wrong
        thread's event, so a resumed or stepping thread sleeps up to ``TIMEOUT_SLOW`` (0.2 s)
        before it notices, in a process with other threads. Both the Cython and the Python
        tracer fetch events through ``py_db.get_internal_queue_and_event``; handing out
        events that also wake every suspended thread fixes it. A spurious wake-up only makes
        a suspended thread check its state and wait again, so only threads that pydevd
        resumed or set stepping are woken: an evaluate posted to one thread does not stir
        the others.
        """
        from _pydevd_bundle.pydevd_constants import STATE_SUSPEND, get_current_thread_id

        original_wait = py_db.do_wait_suspend
        original_events = py_db.get_internal_queue_and_event
        suspended: dict[int, tuple[Any, threading.Event]] = {}  # ident -> (info, event)

        def wake_moved() -> None:
            # Resumed and stepping threads alike are set to run before pydevd sets events; a
            # suspended thread always has a step command (pydevd sets one as it suspends).
            for info, event in list(suspended.values()):
                if info.pydev_state != STATE_SUSPEND:
                    event.set()

        def get_internal_queue_and_event(thread_id: str) -> tuple[Any, Any]:
            queue, event = original_events(thread_id)
            return queue, _AlsoWake(event, wake_moved)

        def do_wait_suspend(thread: threading.Thread, *args: Any, **kwargs: Any) -> Any:
            ident = thread.ident or 0
            _queue, event = original_events(get_current_thread_id(thread))
            self.suspending(ident)
            suspended[ident] = (thread.additional_info, event)  # type: ignore[attr-defined]
            frame = args[0] if args else kwargs.get("frame")  # where it suspends
            on_suspended(ident, frame)
            try:
                return original_wait(thread, *args, **kwargs)
            finally:
                suspended.pop(ident, None)
                self.resuming(ident)
                on_resumed(ident)

        py_db.get_internal_queue_and_event = get_internal_queue_and_event
        py_db.do_wait_suspend = do_wait_suspend

    def hold_unanswered_stops(self, before_request: Callable[[Any], None],
                              after_request: Callable[[Any], None]) -> None:
        """Keep a resume from swallowing a pause the client has not answered.

        A ``breakpoint()`` hit while a client is attached is handed to pydevd at once; the
        thread suspends at its next line. A client that sends ``continue`` and then
        ``disconnect`` (every ``c`` of a terminal that detaches, an IDE window closing) races
        that: pydevd resumes every thread on ``disconnect`` (and on an all-threads
        ``continue``), which cancels a stop not yet made, or resumes one the client never
        saw. Such a hit would be lost. So pydevd's per-thread resume skips:

        - threads told to stop that have not suspended yet (for any resume);
        - on ``disconnect``, threads that stopped for a pause under this client, with no
          request from the client since (it cannot have reacted to that stop).

        Those stay suspended with no client; the agent lists them again
        (:meth:`take_held_over`) and the next client is told of them. Every client request
        is counted here; ``before_request(raw json)`` runs on pydevd's reader thread before
        pydevd acts on it, ``after_request(raw json)`` once it has (both outside this lock).
        """
        from _pydevd_bundle import pydevd_thread_lifecycle
        from _pydevd_bundle.pydevd_process_net_command_json import PyDevJsonCommandProcessor

        original_run = pydevd_thread_lifecycle.internal_run_thread
        original_process = PyDevJsonCommandProcessor.process_net_command_json
        original_disconnect = PyDevJsonCommandProcessor.on_disconnect_request

        def internal_run_thread(thread: threading.Thread, *args: Any, **kwargs: Any) -> Any:
            if not self.may_resume(thread.ident or 0):
                return None
            return original_run(thread, *args, **kwargs)

        def process_net_command_json(processor: Any, py_db: Any, json_contents: Any,
                                     *args: Any, **kwargs: Any) -> Any:
            self.request_arrives()  # on pydevd's reader thread, before the request runs
            before_request(json_contents)
            try:
                return original_process(processor, py_db, json_contents, *args, **kwargs)
            finally:
                after_request(json_contents)

        def on_disconnect_request(processor: Any, *args: Any, **kwargs: Any) -> Any:
            self.begin_disconnect()
            try:
                return original_disconnect(processor, *args, **kwargs)
            finally:
                self.end_disconnect()

        # Module- and class-level: they outlive this object in a fork child, whose own
        # Suspensions must wrap pydevd's originals, not ours (see restore_after_fork).
        self._restore = [
            (pydevd_thread_lifecycle, "internal_run_thread", original_run),
            (PyDevJsonCommandProcessor, "process_net_command_json", original_process),
            (PyDevJsonCommandProcessor, "on_disconnect_request", original_disconnect)]
        pydevd_thread_lifecycle.internal_run_thread = internal_run_thread
        PyDevJsonCommandProcessor.process_net_command_json = process_net_command_json
        PyDevJsonCommandProcessor.on_disconnect_request = on_disconnect_request

    # -- a client's disconnect (on pydevd's reader thread; see hold_unanswered_stops) ---------

    def begin_disconnect(self) -> None:
        """The client's ``disconnect`` is about to go to pydevd, which resumes every thread:
        hold the stops the client has not answered (each kept suspended, listed again for the
        next client). Those are the threads that stopped for a pause new to this client with no
        request since (this disconnect counted as one: a stop made after the request before it
        has had no answer), those told to stop that have not suspended yet, and those that
        suspend before :meth:`end_disconnect` (a stop made while pydevd carries out the
        disconnect, between this call and its resume, was lost: a CI run missed hit 39 of 50)."""
        with self._lock:
            unanswered = {ident for ident in self._fresh & self._suspended
                          if self._stopped_at.get(ident, -1) >= self._requests - 1}
            self._holding = unanswered | self._pending_now()
            self._held_over |= self._holding
            self._disconnected = True
            self._disconnecting = True

    def end_disconnect(self) -> None:
        """pydevd has carried out the disconnect: later resumes are the agent's own."""
        with self._lock:
            self._disconnecting = False
            self._holding = set()

    def may_resume(self, ident: int) -> bool:
        """Whether a resume may let thread ``ident`` run: not while it is told to stop and has
        not suspended yet, nor while a disconnect holds its stop."""
        with self._lock:
            return ident not in self._holding and ident not in self._pending_now()

    def restore_after_fork(self) -> None:
        """In a fork child: put back pydevd's own functions that
        :meth:`hold_unanswered_stops` wrapped (the child's crashed in its parent's wrappers,
        which call into the parent's agent)."""
        for owner, name, original in self._restore:
            setattr(owner, name, original)
        self._restore = []


def _on_stack(frame: FrameType | None, top: FrameType | None) -> bool:
    """Whether ``frame`` is ``top`` or one of its callers (False for no frame)."""
    while frame is not None and top is not None:
        if top is frame:
            return True
        top = top.f_back
    return False


class _AlsoWake:
    """A pydevd thread event whose ``set()`` also calls ``also`` (see Suspensions.watch)."""

    __slots__ = ("_also", "_event")

    def __init__(self, event: threading.Event, also: Callable[[], None]) -> None:
        self._event = event
        self._also = also

    def set(self) -> None:
        self._event.set()
        self._also()

    def wait(self, timeout: float | None = None) -> bool:
        return self._event.wait(timeout)

    def clear(self) -> None:
        self._event.clear()

    def is_set(self) -> bool:
        return self._event.is_set()
