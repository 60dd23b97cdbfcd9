"""Starting the process's pydevd: in-process, reachable by no one, blind to raydebug.

Theory of operation. :func:`start_pydevd` imports debugpy (the first pause's cost:
docs/design.md#first-pause) and starts pydevd the way
``debugpy.listen(..., in_process_debug_adapter=True)`` does: no adapter process, pydevd
speaks DAP itself (docs/design.md#in-process-adapter). But pydevd must never accept a
connection of its own (any local user could connect and run code: docs/design.md#no-listener):
while debugpy starts, pydevd's server socket is a :class:`_NeverListening` one, bound but
ignoring ``listen()``, and once started its accept thread is ended and that socket closed
(:func:`_stop_listening`). Clients reach pydevd only through data connections the agent
dialled out to the hub (see ``clients``).

Four more things are set right at start: on 3.10/3.11 pydevd traces only the thread that
starts it (the tracing keeper arms the others when something needs it:
docs/design.md#tracing-keeper); forked children do not wait for a debugger
(docs/design.md#subprocess); raydebug's ``sys.breakpointhook`` stays installed
(docs/design.md#breakpointhook); raydebug's own files are never traced nor shown
(:func:`_hide_raydebug_frames`), and its threads are invisible to pydevd
(:func:`mark_invisible`, docs/design.md#invisible-threads). Every pydevd internal used here
is listed, with why, in docs/pydevd_internals.md.
"""

from __future__ import annotations

import functools
import os
import socket
import sys
import threading
from collections.abc import Callable
from typing import Any

from ...gil_handoffs import quick_gil_handoffs
from ..own_frames import RAYDEBUG_DIR


def start_pydevd() -> Any:
    """Start pydevd in this process; return its debugger (``PyDB``), still to be made
    private (:func:`make_private`: its socket is bound, never listening, until then).

    Call once per process (debugpy starts once; see ``fork`` for a fork child).
    Raises what debugpy's import or start raises. On return pydevd's tracing is installed
    in the calling thread (on 3.12+, sys.monitoring in every thread), not in the others:
    the caller takes it out again, and arms every thread when something needs it.
    """
    with quick_gil_handoffs():
        return _start_pydevd()


def _start_pydevd() -> Any:
    hook = sys.breakpointhook
    # pydevd warns about frozen modules on every start; the warning is noise in logs.
    os.environ.setdefault("PYDEVD_DISABLE_FILE_VALIDATION", "1")
    import debugpy

    # Importing debugpy.server installs pydevd's breakpointhook, then debugpy's, which calls
    # debugpy.breakpoint(): a thread's breakpoint() until the hook is ours again would go to
    # debugpy's, never to the hub. Routed to ours meanwhile (pydevd's hands on
    # PYTHONBREAKPOINT's); raydebug.agent.breakpoint_caller skips their frames.
    debugs_breakpoint = debugpy.breakpoint
    debugpy.breakpoint = hook
    try:
        _listen()
    finally:  # pydevd's import replaced sys.breakpointhook with its own: ours again
        sys.breakpointhook = hook
        debugpy.breakpoint = debugs_breakpoint
    # Importable only now: debugpy puts its vendored pydevd on sys.path in listen().
    from _pydevd_bundle.pydevd_constants import get_global_debugger

    return get_global_debugger()


def _listen() -> None:
    """Start debugpy's pydevd in this process (``debugpy.listen``), its socket never
    listening, logging and forked children as raydebug needs."""
    import debugpy
    import debugpy.server  # puts debugpy's vendored pydevd on sys.path
    import pydevd
    from debugpy.common import log as debugpy_log
    from debugpy.server import api as debugpy_api

    if debugpy_log.log_dir is None:
        # With no log file (DEBUGPY_LOG_DIR unset) debugpy still describes the whole
        # environment for its log, reading the metadata of every installed package: a
        # first pause's largest cost after the import (docs/design.md#first-pause).
        debugpy_api.ensure_logging.ensured = True  # type: ignore[attr-defined]

    # Without this every forked child (a DataLoader worker) would wait for a debugger.
    debugpy.configure(subProcess=False)
    # listen() is how debugpy starts pydevd in-process; its socket must never accept a
    # connection (that would be a debugger anyone on the machine could reach), not even
    # in the moment before _stop_listening: it is bound but never listens.
    make_server_socket = pydevd.create_server_socket
    pydevd.create_server_socket = _unreachable_server_socket
    settrace = debugpy_api._settrace
    if sys.version_info < (3, 12):
        # pydevd's start would trace every thread, each through a helper thread it waits
        # for (with busy threads, up to a switch interval each), on a first pause's way to
        # its client; the tracing keeper would take it all out again at once. Only the
        # calling thread is traced: the keeper arms every thread when something needs it.
        debugpy_api._settrace = functools.partial(settrace, trace_only_current_thread=True)
    try:
        debugpy.listen(("127.0.0.1", 0), in_process_debug_adapter=True)
    finally:
        pydevd.create_server_socket = make_server_socket
        debugpy_api._settrace = settrace


def make_private(py_db: Any) -> None:
    """End pydevd's listener, and hide raydebug's files from it. Raises if pydevd's
    internals moved (docs/pydevd_internals.md)."""
    _stop_listening(py_db)
    _hide_raydebug_frames(py_db)


def mark_invisible(thread: threading.Thread) -> None:
    """Hide a raydebug thread from pydevd (must run before ``thread.start()``).

    pydevd suspends every thread it traces: an unmarked relay thread would be suspended while
    holding the undelivered ``stopped`` event and deadlock the process
    (docs/design.md#invisible-threads).
    """
    thread.pydev_do_not_trace = True  # type: ignore[attr-defined]
    thread.is_pydev_daemon_thread = True  # type: ignore[attr-defined]


def spare_threads(spared: Callable[[threading.Thread], bool]) -> None:
    """Keep pydevd from suspending the threads ``spared`` picks when a thread stops.

    pydevd, giving a client one notification for all threads, suspends every thread it
    traces whenever one stops (``suspend_all_threads``). A library's service thread that
    never runs the user's code then stops too, and shows nothing: a Ray driver's log
    printer stopped, and its workers' lines stopped reaching the driver's terminal, while
    the driver was paused. Each such thread is hidden from pydevd (as raydebug's own are,
    :func:`mark_invisible`) just before pydevd suspends the others; ``stacks`` still
    shows it (``raydebug_spared``). Raises if pydevd's internals moved."""
    import pydevd

    original = pydevd.suspend_all_threads

    def suspend_all_threads(py_db: Any, except_thread: Any) -> None:
        for thread in threading.enumerate():
            if not getattr(thread, "pydev_do_not_trace", False) and spared(thread):
                mark_invisible(thread)
                thread.raydebug_spared = True  # type: ignore[attr-defined]
        original(py_db, except_thread)

    pydevd.suspend_all_threads = suspend_all_threads


def _hide_raydebug_frames(py_db: Any) -> None:
    """Treat raydebug's own files as debugger internals: never traced, never shown.

    Otherwise pydevd, suspending all threads at a stop, can suspend a thread that is still
    waiting inside raydebug, and the user sees raydebug's frames on top of their own.
    """
    original = py_db.dont_trace_external_files

    def dont_trace_external_files(abs_path: str) -> bool:
        return abs_path.startswith(RAYDEBUG_DIR) or bool(original(abs_path))

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
