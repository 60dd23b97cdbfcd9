"""The process's pydevd, started on first use and watched while threads are paused.

debugpy is imported here and nowhere else in the agent, and only when a thread pauses:
importing it at worker start would slow every Ray worker (DESIGN.md: tracing costs 3-11x on
Python <= 3.11 once installed). pydevd runs with its in-process DAP adapter, but listens on
no port: its loopback listener is shut as soon as it starts (any local user could otherwise
connect to it and run code), and each client's connection, dialled out to the hub and
authenticated by the agent, is handed to pydevd as its accept thread would have done.

pydevd offers no notification when a thread suspends or resumes, so :class:`Debugger`
wraps the debugger's ``do_wait_suspend`` (every stop of every thread goes through it, from
the Cython tracer, the sys.monitoring tracer and post-mortem alike) to keep a set of
suspended threads and call ``on_resumed`` when one runs again.

Two more rules hold whatever a client does. A pause handed to pydevd is not lost to a resume
that races it (see ``_hold_unanswered_stops``). And tracing follows need, not attachment: a
keeper thread removes pydevd's tracing whenever no thread is suspended, stepping or about to
stop and no breakpoint is set, and it is armed again before a request that sets breakpoints
or pauses (see ``_keep_tracing``). Every pydevd internal used here is listed, with why, in
docs/pydevd_internals.md.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import sys
import threading
import time
from collections.abc import Callable
from types import FrameType, TracebackType
from typing import Any

from .report import say

ExcInfo = tuple[type[BaseException], BaseException, TracebackType]


class Debugger:
    """pydevd inside this process. Thread-safe; :meth:`ensure_started` is idempotent."""

    def __init__(
        self, on_suspended: Callable[[int, FrameType | None], None],
        on_resumed: Callable[[int], None]
    ) -> None:
        self._restore_after_fork: list[tuple[Any, str, Any]] = []  # see _hold_unanswered_stops
        self._on_suspended = on_suspended
        self._on_resumed = on_resumed
        self._lock = threading.Lock()
        self._start_lock = threading.Lock()
        self._py_db: Any = None
        self._start_error: Exception | None = None
        self._suspended: set[int] = set()  # thread idents inside do_wait_suspend
        # Pauses handed to pydevd that a departing client must not take with it (see
        # _hold_unanswered_stops): threads told to stop that have not suspended yet, threads
        # that stopped for a pause while a client was attached, with the client's request
        # count at that stop, and the threads the last disconnect left suspended.
        self._pending: dict[int, float] = {}  # ident -> when it was told to stop
        self._fresh: set[int] = set()
        self._stopped_at: dict[int, int] = {}
        self._requests = 0
        self._held_over: set[int] = set()
        self._disconnected = False  # the client sent disconnect; no new client yet
        self._traced = False  # pydevd's tracing is installed in the process's threads
        self._untraced = threading.Event()  # set while tracing is off
        self._reconsider = threading.Event()  # wakes the tracing keeper (see _keep_tracing)

    def ensure_started(self) -> None:
        """Start pydevd if it is not running (the first time takes ~150 ms); idempotent.

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

    def _start(self) -> None:
        hook = sys.breakpointhook
        # pydevd warns about frozen modules on every start; the warning is noise in logs.
        os.environ.setdefault("PYDEVD_DISABLE_FILE_VALIDATION", "1")
        import debugpy
        import debugpy.server  # puts debugpy's vendored pydevd on sys.path
        import pydevd
        from debugpy.common import log as debugpy_log
        from debugpy.server import api as debugpy_api

        if debugpy_log.log_dir is None:
            # With no log file (DEBUGPY_LOG_DIR unset) debugpy still describes the whole
            # environment for its log, reading the metadata of every installed package:
            # ~90 ms of a first pause here, more in a Ray environment.
            debugpy_api.ensure_logging.ensured = True  # type: ignore[attr-defined]

        # Without this every forked child (a DataLoader worker) would wait for a debugger.
        debugpy.configure(subProcess=False)
        # listen() is how debugpy starts pydevd in-process; its socket must never accept a
        # connection (that would be a debugger anyone on the machine could reach), not even
        # in the moment before _stop_listening: it is bound but never listens.
        make_server_socket = pydevd.create_server_socket
        pydevd.create_server_socket = _unreachable_server_socket
        try:
            debugpy.listen(("127.0.0.1", 0), in_process_debug_adapter=True)
        finally:
            pydevd.create_server_socket = make_server_socket
        # Importing pydevd replaced sys.breakpointhook with its own; keep raydebug's.
        sys.breakpointhook = hook
        # Importable only now: debugpy puts its vendored pydevd on sys.path in listen().
        from _pydevd_bundle.pydevd_constants import get_global_debugger

        py_db = get_global_debugger()
        try:
            _stop_listening(py_db)
            _hide_raydebug_frames(py_db)
            self._watch_suspensions(py_db)
            self._hold_unanswered_stops()
        except BaseException:
            with contextlib.suppress(Exception):  # not half-traced: the process runs on
                _remove_tracing(py_db)
            raise
        self._traced = True
        self._py_db = py_db  # last: a started debugger is a complete one
        keeper = threading.Thread(target=self._keep_tracing, name="raydebug-tracing",
                                  daemon=True)
        mark_invisible(keeper)
        keeper.start()

    def _watch_suspensions(self, py_db: Any) -> None:
        """Track suspended threads, and wake all of them whenever pydevd wakes one.

        pydevd bug (DESIGN.md): ``_update_stepping_info`` wakes the wrong thread's event, so
        a resumed or stepping thread sleeps up to ``TIMEOUT_SLOW`` (0.2 s) before it notices:
        every ``next`` took ~200 ms in a process with other threads. Both the Cython and the
        Python tracer fetch events through ``py_db.get_internal_queue_and_event``; handing
        out events that also wake every suspended thread fixes it. A spurious wake-up only
        makes a suspended thread check its state and wait again, so only threads that
        pydevd resumed or set stepping are woken: an evaluate posted to one thread does
        not stir the others.
        """
        from _pydevd_bundle.pydevd_constants import STATE_SUSPEND, get_current_thread_id

        original_wait = py_db.do_wait_suspend
        original_events = py_db.get_internal_queue_and_event
        suspended: dict[int, tuple[Any, threading.Event]] = {}  # ident -> (info, event)

        def wake_moved() -> None:
            for info, event in list(suspended.values()):
                if info.pydev_state != STATE_SUSPEND or info.pydev_step_cmd != -1:
                    event.set()

        def get_internal_queue_and_event(thread_id: str) -> tuple[Any, Any]:
            queue, event = original_events(thread_id)
            return queue, _AlsoWake(event, wake_moved)

        def do_wait_suspend(thread: threading.Thread, *args: Any, **kwargs: Any) -> Any:
            ident = thread.ident or 0
            _queue, event = original_events(get_current_thread_id(thread))
            with self._lock:
                self._suspended.add(ident)
                self._pending.pop(ident, None)
                self._stopped_at[ident] = self._requests
                if self._disconnected:  # stopped after its client said goodbye: not its
                    self._held_over.add(ident)
                suspended[ident] = (thread.additional_info, event)  # type: ignore[attr-defined]
            frame = args[0] if args else kwargs.get("frame")  # where it suspends
            self._on_suspended(ident, frame)
            try:
                return original_wait(thread, *args, **kwargs)
            finally:
                with self._lock:
                    self._suspended.discard(ident)
                    self._fresh.discard(ident)
                    self._stopped_at.pop(ident, None)
                    suspended.pop(ident, None)
                self._on_resumed(ident)
                self.reconsider_tracing()  # e.g. `continue` with nothing else to stop for

        py_db.get_internal_queue_and_event = get_internal_queue_and_event
        py_db.do_wait_suspend = do_wait_suspend

    def _hold_unanswered_stops(self) -> None:
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
        (:meth:`take_held_over`) and the next client is told of them (:meth:`replay_stops`).
        """
        from _pydevd_bundle import pydevd_thread_lifecycle
        from _pydevd_bundle.pydevd_process_net_command_json import PyDevJsonCommandProcessor

        original_run = pydevd_thread_lifecycle.internal_run_thread
        original_process = PyDevJsonCommandProcessor.process_net_command_json
        original_disconnect = PyDevJsonCommandProcessor.on_disconnect_request
        holding: set[int] = set()  # during a disconnect: the unanswered stops it must keep

        def internal_run_thread(thread: threading.Thread, *args: Any, **kwargs: Any) -> Any:
            with self._lock:
                held = thread.ident in self._pending_now() or thread.ident in holding
            if held:
                return None
            return original_run(thread, *args, **kwargs)

        def process_net_command_json(processor: Any, py_db: Any, json_contents: Any,
                                     *args: Any, **kwargs: Any) -> Any:
            with self._lock:
                self._requests += 1  # on pydevd's reader thread, before the request runs
            if _arming_request(json_contents):
                with self._start_lock:  # before pydevd acts on it: see _keep_tracing
                    self._arm_locked()
            try:
                return original_process(processor, py_db, json_contents, *args, **kwargs)
            finally:
                self.reconsider_tracing()

        def on_disconnect_request(processor: Any, *args: Any, **kwargs: Any) -> Any:
            with self._lock:
                # This disconnect counted as one request: a stop made after the request
                # before it has had no answer.
                unanswered = {ident for ident in self._fresh & self._suspended
                              if self._stopped_at.get(ident, -1) >= self._requests - 1}
                holding.update(unanswered)
                self._held_over |= unanswered | self._pending_now()
                self._disconnected = True
            try:
                return original_disconnect(processor, *args, **kwargs)
            finally:
                with self._lock:
                    holding.clear()

        # Module- and class-level: they outlive this Debugger in a fork child, whose own
        # Debugger must wrap pydevd's originals, not ours (reset_after_fork puts them back).
        self._restore_after_fork = [
            (pydevd_thread_lifecycle, "internal_run_thread", original_run),
            (PyDevJsonCommandProcessor, "process_net_command_json", original_process),
            (PyDevJsonCommandProcessor, "on_disconnect_request", original_disconnect)]
        pydevd_thread_lifecycle.internal_run_thread = internal_run_thread
        PyDevJsonCommandProcessor.process_net_command_json = process_net_command_json
        PyDevJsonCommandProcessor.on_disconnect_request = on_disconnect_request

    def _pending_now(self) -> set[int]:
        """Threads told to stop that have not suspended yet (lock held). A stop that has not
        happened within PENDING_SECONDS never will (e.g. ``breakpoint()`` on a function's
        last line, stepping out into code pydevd skips): forgotten, or the process would
        stay traced, and that thread unresumable, for good."""
        now = time.monotonic()
        for ident in [i for i, since in self._pending.items() if now - since > PENDING_SECONDS]:
            del self._pending[ident]
        return set(self._pending)

    def take_held_over(self) -> tuple[set[int], bool]:
        """After a client left: the threads whose pause it did not take (told to stop but
        not yet suspended, kept suspended by its disconnect, or suspended after it: see
        _hold_unanswered_stops), and whether it sent ``disconnect``. Each call returns
        them once."""
        with self._lock:
            held = self._held_over | self._pending_now()
            self._held_over = set()
            return held, self._disconnected

    def serve_client(self, sock: socket.socket) -> None:
        """Make ``sock`` (connected, authenticated) pydevd's client connection.

        As pydevd's accept thread does: the previous client, if any, is disconnected without
        resuming threads. ``initialize_network`` sleeps 0.1 s after starting pydevd's reader
        and writer, so it runs on a short-lived helper thread, not on the caller's.
        """
        self.ensure_started()
        # Importable only once started (see _start), so after ensure_started.
        from _pydevd_bundle.pydevd_api import PyDevdAPI

        py_db = self._py_db
        with self._lock:
            self._disconnected = False
            self._held_over = set()
        if getattr(py_db, "reader", None) is not None:
            PyDevdAPI().request_disconnect(py_db, resume_threads=False)
        sock.settimeout(None)
        handoff = threading.Thread(target=py_db.initialize_network, args=(sock,),
                                   kwargs={"terminate_on_socket_close": False},
                                   name="raydebug-handoff", daemon=True)
        mark_invisible(handoff)
        handoff.start()

    def forget_client(self) -> None:
        """After a client left: drop what pydevd queued for it, and whatever it would queue.

        With ``redirectOutput`` pydevd copies stdout/stderr into its writer's queue, and the
        copy outlives the client (pydevd's disconnect only clears a flag). The writer thread
        ends with the connection, so its queue never empties again; at exit pydevd's
        non-daemon CheckAliveThread waits for that queue to be empty, and a process that
        printed after its client left would never exit (a long-lived Ray worker's queue
        would also grow without bound). The next client gets a new writer.

        ``sys.stdout`` itself is left alone: on Python 3.11 ``print()`` holds only a
        borrowed reference to it, so swapping it while another thread prints can free the
        stream under that thread (a segfault we saw).
        """
        import queue

        py_db = self._py_db
        if py_db is None:
            return
        py_db.enable_output_redirection(False, False)
        writer = getattr(py_db, "writer", None)
        if writer is None:
            return
        writer.add_command = _discard  # its client is gone: nothing more is for it
        with contextlib.suppress(queue.Empty):
            while True:
                writer._cmd_queue.get_nowait()

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

    @staticmethod
    def cancel_step() -> None:
        """Let the current thread run on instead of finishing a step.

        A step off the end of the user's code never comes back to it in a Ray worker:
        pydevd, stepping "into my code", would stop in whatever code of no library the
        worker runs next (Ray's ``<string>`` helpers, the next task).
        """
        info = getattr(threading.current_thread(), "additional_info", None)
        if info is not None:
            info.pydev_step_cmd = -1
            info.pydev_step_stop = None

    def is_suspended(self, thread_ident: int) -> bool:
        with self._lock:
            return thread_ident in self._suspended

    def stop_at(self, frame: FrameType, under_client: bool = False) -> None:
        """Make the current thread stop at the next line ``frame`` runs (like pdb.set_trace).

        Returns at once; the stop happens when the caller's frame executes its next line, and
        no resume can cancel it before (see _hold_unanswered_stops). ``under_client``: a
        client is attached and ready, and this pause is new to it.
        """
        import pydevd

        ident = threading.get_ident()
        with self._lock:
            self._pending[ident] = time.monotonic()
            if under_client:
                self._fresh.add(ident)
        with self._start_lock:
            self._arm_locked()  # every thread: breakpoints may be set in any of them
            pydevd.settrace(
                suspend=True,
                trace_only_current_thread=True,
                patch_multiprocessing=False,
                stop_at_frame=frame,
                notify_stdin=False,
            )

    def stop_on_exception(self, exc_info: ExcInfo) -> None:
        """Suspend the current thread post-mortem in the frame that raised; block until resumed."""
        with self._lock:
            self._pending[threading.get_ident()] = time.monotonic()
        with self._start_lock:
            self._arm_locked()
        self._py_db.trigger_exception_handler(exc_info, as_uncaught=False)

    # -- tracing follows need -----------------------------------------------------------------

    def reconsider_tracing(self) -> None:
        """Ask for tracing to be removed if nothing needs it any more (returns at once)."""
        self._reconsider.set()

    def _keep_tracing(self) -> None:
        """The tracing keeper's thread: remove pydevd's tracing whenever nothing needs it.

        On Python <= 3.11 pydevd's trace function, once installed, makes pure-Python code
        run 3-11x slower in every thread, attached client or not, for the rest of the
        process's life (docs/design.md); Ray reuses worker processes, so later tasks would pay.
        So tracing follows need, not attachment: it is on only while a thread is suspended,
        stepping, paused or about to stop, or the client has breakpoints set (line, function,
        or caught-exception filters). It is armed again, in every thread, before pydevd
        handles a request that sets breakpoints or pauses, and when a thread pauses; both
        ways take ~1 ms. Runs on its own thread, invisible to pydevd: never inside a trace
        function or under the agent's lock. On 3.12+ pydevd uses sys.monitoring, whose idle
        cost is ~0; it is stopped and started the same way.
        """
        recheck: float | None = None
        followups: list[float] = []
        while True:
            # pydevd changes a thread's stepping state without telling us: while only that
            # kind of need keeps tracing on, look again soon.
            self._reconsider.wait(followups[0] if followups else recheck)
            self._reconsider.clear()
            recheck = None
            try:
                with self._start_lock:
                    if not self._traced:
                        # A thread that was still inside pydevd's trace function when
                        # tracing was removed (just resumed) can put it back on its way
                        # out: remove it again, a few times, until the process stays clean.
                        if followups:
                            followups.pop(0)
                            _remove_tracing(self._py_db)
                        continue
                    followups = []
                    need = self._needs_tracing()
                    if os.environ.get("RAYDEBUG_DEBUG_TRACING"):
                        say(f"tracing {time.time():.3f}: {need or 'not needed: removing it'}")
                    if need in TRANSIENT_NEEDS:
                        recheck = RECHECK_SECONDS
                    elif need is None:
                        _remove_tracing(self._py_db)
                        self._traced = False
                        self._untraced.set()
                        followups = list(FOLLOWUP_SECONDS)
            except Exception as error:  # the process keeps running, only slower
                say(f"could not remove the debugger's tracing ({type(error).__name__}: "
                    f"{error}); this process may run slower until the next pause")

    def _needs_tracing(self) -> str | None:
        """What needs pydevd's tracing now (see _keep_tracing), or None."""
        from _pydevd_bundle.pydevd_constants import STATE_SUSPEND

        with self._lock:
            if self._suspended:
                return "a thread is suspended"
            if self._pending_now():
                return ABOUT_TO_STOP
        py_db = self._py_db
        breakpoints = (py_db.breakpoints, py_db.file_to_id_to_line_breakpoint,
                       py_db.file_to_id_to_plugin_breakpoint)
        if any(any(per_file.values()) for per_file in breakpoints):
            return "line breakpoints"
        # Uncaught-exception filters need no tracing here: raydebug's own hooks take
        # uncaught exceptions (post-mortem), and VS Code sets that filter by default.
        if py_db.function_breakpoint_name_to_breakpoint:
            return "function breakpoints"
        if py_db.break_on_caught_exceptions or py_db.break_on_user_uncaught_exceptions:
            return "exception breakpoints"
        if py_db.has_plugin_line_breaks or py_db.has_plugin_exception_breaks:
            return "plugin breakpoints"
        for thread in threading.enumerate():
            info = getattr(thread, "additional_info", None)
            if info is not None and info.pydev_step_cmd != -1:
                return STEPPING
            if info is not None and info.pydev_state == STATE_SUSPEND:
                return ASKED_TO_PAUSE
        return None

    def _arm_locked(self) -> None:
        """Install pydevd's tracing in every thread, present and future (start lock held)."""
        if self._traced:
            return
        _install_tracing(self._py_db)
        self._traced = True
        self._untraced.clear()

    def reset_after_fork(self) -> None:
        """In a fork child: forget the parent's pydevd so that the child can start its own.

        debugpy patches ``os.fork`` only with ``subProcess=True`` (we set False), so pydevd's
        own fork handling never ran: do what it does (``_on_forked_process`` without tracing),
        and take the parent's tracing out of the forking thread, the child's only thread.
        """
        if self._py_db is None:
            return
        for pydevd_thread in (getattr(self._py_db, "writer", None),
                              getattr(self._py_db, "reader", None)):
            sock = getattr(pydevd_thread, "sock", None)
            if sock is not None:  # our copy of the parent's client connection: close() only
                with contextlib.suppress(OSError):
                    sock.close()
        import debugpy.server.api
        from _pydev_bundle import pydev_monkey
        from _pydevd_bundle.pydevd_constants import PYDEVD_USE_SYS_MONITORING

        if PYDEVD_USE_SYS_MONITORING:  # Python >= 3.12
            from _pydevd_sys_monitoring import pydevd_sys_monitoring

            pydevd_sys_monitoring.stop_monitoring(all_threads=True)
            # The forking thread's own record, with the parent's state (pydevd resets it
            # too when it handles a fork): kept, the child's first stop never happens.
            pydevd_sys_monitoring.reset_thread_local_info()
        pydev_monkey._on_forked_process(setup_tracing=False)  # restores sys.settrace too
        pydev_monkey.undo_patch_thread_modules()
        threading.settrace(None)  # type: ignore[arg-type,unused-ignore]
        sys.settrace(None)
        debugpy.server.api.listen.called = False
        for owner, name, original in self._restore_after_fork:
            setattr(owner, name, original)
        self._restore_after_fork = []
        self._py_db = None

    def wait_untraced(self, timeout: float) -> bool:
        """Wait until tracing is off (for tests and benchmarks); False on timeout."""
        return self._untraced.wait(timeout)

    def is_traced(self) -> bool:
        return self._traced

    def suspended_threads(self) -> set[int]:
        with self._lock:
            return set(self._suspended)

    def replay_stops(self, idents: set[int]) -> int:
        """Tell the connected client about threads that stayed suspended from an earlier client.

        pydevd sends ``stopped`` only when a thread suspends; a client that connects later
        sees none (DESIGN.md), so we ask pydevd's own command factory for the same event.
        ``idents`` are threads suspended before the client became ready (a snapshot taken
        before releasing new pauses, so none is announced twice). Returns how many were.
        """
        from _pydevd_bundle.pydevd_constants import get_thread_id

        py_db = self._py_db
        threads = [t for t in threading.enumerate() if t.ident in idents]
        for thread in threads:
            reason = getattr(thread, "stop_reason", None)
            command = py_db.cmd_factory.make_thread_suspend_single_notification(
                py_db, get_thread_id(thread), thread, reason
            )
            py_db.writer.add_command(command)
        return len(threads)


def _discard(command: Any) -> None:
    pass


class _AlsoWake:
    """A pydevd thread event whose ``set()`` also calls ``also`` (see _watch_suspensions)."""

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


def mark_invisible(thread: threading.Thread) -> None:
    """Hide a raydebug thread from pydevd (must run before ``thread.start()``).

    pydevd suspends every thread it traces: an unmarked relay thread would be suspended while
    holding the undelivered ``stopped`` event and deadlock the worker (DESIGN.md).
    """
    thread.pydev_do_not_trace = True  # type: ignore[attr-defined]
    thread.is_pydev_daemon_thread = True  # type: ignore[attr-defined]


ABOUT_TO_STOP = "a thread is about to stop"
STEPPING = "a thread is stepping"
ASKED_TO_PAUSE = "a thread is asked to pause"
TRANSIENT_NEEDS = (ABOUT_TO_STOP, STEPPING, ASKED_TO_PAUSE)
RECHECK_SECONDS = 0.005
PENDING_SECONDS = 2.0  # see Debugger._pending_now
FOLLOWUP_SECONDS = (0.002, 0.01, 0.05)  # removal again after these waits (see _keep_tracing)


def _arming_request(json_contents: Any) -> bool:
    """Whether a DAP request (pydevd's raw text) sets breakpoints or pauses threads."""
    text = json_contents.decode("utf-8", "replace") if isinstance(json_contents, bytes) \
        else str(json_contents)
    if '"pause"' not in text and 'Breakpoints"' not in text:
        return False  # the common case, without parsing
    try:
        command = json.loads(text).get("command")
    except (ValueError, AttributeError):
        return False
    return command in ARMING_COMMANDS


ARMING_COMMANDS = frozenset({"pause", "setBreakpoints", "setFunctionBreakpoints",
                             "setExceptionBreakpoints"})


def _remove_tracing(py_db: Any) -> None:
    """Take pydevd's tracing out of every thread, present and future (see _keep_tracing)."""
    from _pydev_bundle.pydev_monkey import undo_patch_thread_modules
    from _pydevd_bundle.pydevd_constants import PYDEVD_USE_SYS_MONITORING

    undo_patch_thread_modules()  # new threads start untraced
    if PYDEVD_USE_SYS_MONITORING:  # Python >= 3.12
        from _pydevd_sys_monitoring import pydevd_sys_monitoring

        pydevd_sys_monitoring.stop_monitoring(all_threads=True)
        return
    import pydevd_tracing

    original_settrace = pydevd_tracing.TracingFunctionHolder._original_tracing or sys.settrace
    threading.settrace(None)  # type: ignore[arg-type,unused-ignore]

    def remove_myself(frame: Any, event: str, arg: Any) -> None:
        original_settrace(None)  # runs in each thread at its next Python event

    _set_trace_in_threads(remove_myself, skip_invisible=False)
    original_settrace(None)
    # A frame pydevd traced keeps its local trace function, which gets that frame's line
    # events until the thread's next call runs remove_myself, and can put pydevd's thread
    # tracer back meanwhile (seen after a `pause`, which traces every frame of the thread).
    for top in sys._current_frames().values():
        frame: FrameType | None = top
        while frame is not None:
            frame.f_trace = None
            frame = frame.f_back


def _install_tracing(py_db: Any) -> None:
    """Put pydevd's tracing back in every thread, present and future (after _remove_tracing)."""
    from _pydevd_bundle.pydevd_constants import PYDEVD_USE_SYS_MONITORING

    py_db.patch_threads()  # new threads start traced
    if PYDEVD_USE_SYS_MONITORING:
        py_db.enable_tracing(apply_to_all_threads=True)  # starts sys.monitoring again
        return
    _set_trace_in_threads(py_db.trace_dispatch, skip_invisible=True)
    if not getattr(threading.current_thread(), "pydev_do_not_trace", False):
        import pydevd_tracing

        pydevd_tracing.SetTrace(py_db.trace_dispatch)  # e.g. a post-mortem thread


def _set_trace_in_threads(trace: Any, skip_invisible: bool) -> None:
    """Make ``trace`` the trace function of every other thread (Python <= 3.11).

    What ``pydevd_tracing.set_trace_to_threads`` does, without the helper thread it starts
    and waits for, per thread, to raise a counter that Python 3.11 no longer has: with busy
    threads holding the GIL that wait cost ~100 ms, during which every thread stalled, and
    the process ran traced all along. pydevd's helper library sets another thread's trace
    function directly, as pydevd itself does (~0.1 ms for a few threads).
    """
    import ctypes

    import pydevd_tracing

    lib = pydevd_tracing._load_python_helper_lib()
    if lib is None:
        raise RuntimeError("pydevd's tracing helper library is not available here")
    set_trace = pydevd_tracing.TracingFunctionHolder._original_tracing or sys.settrace
    current = threading.get_ident()
    invisible = {thread.ident for thread in threading.enumerate()
                 if getattr(thread, "pydev_do_not_trace", False)} if skip_invisible else set()
    for ident in sys._current_frames():
        if ident == current or ident in invisible:
            continue
        result = lib.AttachDebuggerTracing(ctypes.c_int(0), ctypes.py_object(set_trace),
                                           ctypes.py_object(trace), ctypes.c_uint(ident),
                                           ctypes.py_object(None))
        if os.environ.get("RAYDEBUG_DEBUG_TRACING"):
            say(f"tracing: set {getattr(trace, '__name__', trace)} in {ident}: {result}")


def _hide_raydebug_frames(py_db: Any) -> None:
    """Treat raydebug's own files as debugger internals: never traced, never shown.

    Otherwise pydevd, suspending all threads at a stop, can suspend a thread that is still
    waiting inside raydebug, and the user sees raydebug's frames on top of their own.
    """
    package_dir = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep
    original = py_db.dont_trace_external_files

    def dont_trace_external_files(abs_path: str) -> bool:
        return abs_path.startswith(package_dir) or bool(original(abs_path))

    py_db.dont_trace_external_files = dont_trace_external_files
    py_db.get_cache_file_type().clear()  # forget types computed before this rule


class _NeverListening(socket.socket):
    """A bound TCP socket that ignores ``listen()``, so no connection can ever reach it;
    ``accept()`` waits until the socket is closed, then fails as a closed socket does."""

    def __init__(self) -> None:
        super().__init__(socket.AF_INET, socket.SOCK_STREAM)
        self._closed = threading.Event()

    def listen(self, backlog: int = 0) -> None:
        pass

    def accept(self) -> tuple[socket.socket, Any]:
        self._closed.wait()
        raise OSError("raydebug: pydevd's listener is closed")

    def close(self) -> None:
        self._closed.set()
        super().close()


def _unreachable_server_socket(host: str, port: int) -> socket.socket:
    """Stands in for pydevd's ``create_server_socket`` while debugpy starts."""
    server = _NeverListening()
    try:
        server.bind(("127.0.0.1", 0))
    except OSError:
        server.close()
        raise
    return server


def _stop_listening(py_db: Any) -> None:
    """End pydevd's accept thread and close its socket (bound, never listening: see
    _NeverListening): clients reach pydevd only through the hub.

    The thread is told to stop first, so that the failed ``accept()`` ends it.
    """
    from _pydevd_bundle.pydevd_daemon_thread import PyDBDaemonThread

    waiter = getattr(py_db, "_waiting_for_connection_thread", None)
    server = getattr(waiter, "_server_socket", None)
    if waiter is None or server is None:
        return
    PyDBDaemonThread.do_kill_pydev_thread(waiter)  # sets its stop flag
    try:
        server.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass
    waiter.do_kill_pydev_thread()  # closes the socket
