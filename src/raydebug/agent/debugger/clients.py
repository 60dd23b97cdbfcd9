"""pydevd's clients: each one a data connection the agent dialled out to the hub, handed to
pydevd.

Theory of operation. pydevd listens on no port (docs/design.md#no-listener); each client's
connection, dialled out to the hub and authenticated by the agent, is handed to pydevd as
its accept thread would have done (:func:`serve`). When the client leaves, what pydevd
queued for it is dropped (:func:`forget`), or the process could never exit. pydevd tells a
client of a thread's stop only as the thread suspends; a client that arrives later is told
of threads still suspended through pydevd's own command factory (:func:`replay_stops`,
docs/design.md#reconnect). pydevd writes each message in two ``sendall()`` calls; the socket
it is given joins them (:class:`OneWritePerMessage`, docs/design.md#nodelay).
"""

from __future__ import annotations

import contextlib
import socket
import threading
from typing import Any

from .start import mark_invisible


def serve(py_db: Any, sock: socket.socket) -> None:
    """Make ``sock`` (connected, authenticated) the client connection of ``py_db`` (started).

    As pydevd's accept thread does: the previous client, if any, is disconnected without
    resuming threads. ``initialize_network`` sleeps 0.1 s after starting pydevd's reader
    and writer, so it runs on a short-lived helper thread, not on the caller's. pydevd
    takes the connection over: ``sock`` is detached from it (closing ``sock`` then does
    nothing), even when this raises.
    """
    # Importable only once pydevd has started (see :mod:`.start`).
    from _pydevd_bundle.pydevd_api import PyDevdAPI

    if getattr(py_db, "reader", None) is not None:
        PyDevdAPI().request_disconnect(py_db, resume_threads=False)
    client = OneWritePerMessage(sock.family, sock.type, sock.proto, fileno=sock.detach())
    try:
        client.settimeout(None)
        handoff = threading.Thread(target=py_db.initialize_network, args=(client,),
                                   kwargs={"terminate_on_socket_close": False},
                                   name="raydebug-handoff", daemon=True)
        mark_invisible(handoff)
        handoff.start()
    except BaseException:
        client.close()  # (``sock`` no longer owns it: the caller's close would not)
        raise


class OneWritePerMessage(socket.socket):
    """pydevd's client socket, on which each DAP message leaves in one write.

    pydevd sends a message as two ``sendall()`` calls: its ``Content-Length`` header, then
    its body. With ``TCP_NODELAY`` (docs/design.md#nodelay) each goes as a segment of its
    own, and the hub wakes, reads and waits again for the header alone. Here a header is
    kept until the next ``sendall()``, and goes with that body in one call. Only pydevd's
    writer thread sends on it.
    """

    _header = b""

    def sendall(self, data: Any, flags: int = 0) -> None:
        if isinstance(data, bytes) and data.startswith(b"Content-Length:") \
                and data.endswith(b"\r\n\r\n"):
            self._header = data
            return
        if self._header:
            data, self._header = self._header + data, b""
        super().sendall(data, flags)


def forget(py_db: Any) -> None:
    """After a client left: drop what pydevd queued for it, and whatever it would queue.

    With ``redirectOutput`` pydevd copies stdout/stderr into its writer's queue, and the
    copy outlives the client (pydevd's disconnect only clears a flag). The writer thread
    ends with the connection, so its queue never empties again; at exit pydevd's
    non-daemon CheckAliveThread waits for that queue to be empty, and a process that
    printed after its client left would never exit (a long-lived Ray worker's queue
    would also grow without bound). The next client gets a new writer.

    ``sys.stdout`` itself is left alone: on Python 3.11 ``print()`` holds only a
    borrowed reference to it, so swapping it while another thread prints can free the
    stream under that thread (a segfault).
    """
    import queue

    py_db.enable_output_redirection(False, False)
    writer = getattr(py_db, "writer", None)
    if writer is None:
        return
    writer.add_command = _discard  # its client is gone: nothing more is for it
    with contextlib.suppress(queue.Empty):
        while True:
            writer._cmd_queue.get_nowait()


def replay_stops(py_db: Any, idents: set[int]) -> int:
    """Tell the connected client about threads that stayed suspended from an earlier client.

    pydevd sends ``stopped`` only when a thread suspends; a client that connects later
    sees none (docs/design.md#reconnect), so we ask pydevd's own command factory for the
    same event. Returns how many threads were announced.
    """
    from _pydevd_bundle.pydevd_constants import get_thread_id

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
