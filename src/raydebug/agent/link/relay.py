"""A TLS data connection relayed to pydevd through a socketpair, by the one thread using TLS.

Why. pydevd serves a client with two threads on one socket: its reader calls ``recv()`` while
its writer calls ``send()``, and a disconnect shuts the socket down from a third. That is
fine on a plain socket, but OpenSSL does not allow one SSL object to be used by two threads at
once (rare corrupt records or hangs, likelier with TLS 1.3 post-handshake messages), and a
shutdown from another thread drops the TLS layer without its close_notify. So on a TLS
data connection pydevd gets one end of a ``socketpair()`` and this module's thread alone touches the
``SSLSocket``. Without TLS there is no relay: pydevd gets the hub's socket itself.

Theory of operation. Both sockets are non-blocking and watched by one selector. Each pass
first moves every byte it can without waiting (so bytes OpenSSL has already decrypted, which
make no socket readable, are never stranded), then sleeps until an event that a blocked
transfer named: an SSL read may need the socket writable, an SSL write may need it readable.
Each direction buffers at most ``LIMIT`` bytes; a full buffer stops reading its source, so a
slow reader slows the writer, as TCP would. When one side ends (EOF), the bytes it sent are
delivered to the other within ``FLUSH_TIMEOUT``, then both are closed (TLS with a
close_notify): the hub sees the data connection close when pydevd shuts its socket, as without TLS,
and pydevd reads EOF when the hub drops the connection. An error on either side closes both at
once. The thread then ends.
"""

from __future__ import annotations

import contextlib
import selectors
import socket
import ssl
import threading
import time

from ..debugger.facade import mark_invisible

LIMIT = 256 * 1024  # bytes buffered per direction
CHUNK = 64 * 1024
FLUSH_TIMEOUT = 5.0  # for the last bytes of a side that ended to reach the other

READ, WRITE = selectors.EVENT_READ, selectors.EVENT_WRITE


def start_relay(tls: ssl.SSLSocket) -> tuple[socket.socket, threading.Thread]:
    """Relay ``tls`` (connected, authenticated) on a new thread, invisible to pydevd.

    Returns the plain socket to give pydevd and the thread. From now on the thread owns
    ``tls`` (no one else may use it) and closes it; it ends when the data connection does.
    """
    theirs, mine = socket.socketpair()
    thread = threading.Thread(target=_Relay(tls, mine).run, name="raydebug-tls-relay",
                              daemon=True)
    mark_invisible(thread)
    try:
        thread.start()
    except BaseException:
        theirs.close()
        mine.close()
        raise
    return theirs, thread


class _Relay:
    def __init__(self, tls: ssl.SSLSocket, plain: socket.socket) -> None:
        self._tls = tls
        self._plain = plain  # our end of pydevd's socketpair
        self._down = bytearray()  # from the hub, for pydevd
        self._up = bytearray()  # from pydevd, for the hub
        self._hub_open = True  # no EOF from the hub yet
        self._pydevd_open = True  # no EOF from pydevd yet

    def run(self) -> None:
        selector = selectors.DefaultSelector()
        deadline: float | None = None
        try:
            self._tls.setblocking(False)
            self._plain.setblocking(False)
            while True:
                wanted = self._pump()
                if not (self._hub_open and self._pydevd_open):
                    # A side ended: done once its last bytes are delivered (nothing left
                    # to wait for), or when the other side would not take them in time.
                    if deadline is None:
                        deadline = time.monotonic() + FLUSH_TIMEOUT
                    if wanted == (0, 0) or time.monotonic() >= deadline:
                        return
                _watch(selector, self._tls, wanted[0])
                _watch(selector, self._plain, wanted[1])
                selector.select(None if deadline is None
                                else max(0.0, deadline - time.monotonic()))
        except OSError:  # SSLError included: the connection broke, close both sides
            pass
        finally:
            selector.close()
            self._plain.close()
            with contextlib.suppress(OSError, ValueError):
                self._tls.unwrap()  # sends close_notify; does not wait for the hub's
            self._tls.close()

    def _pump(self) -> tuple[int, int]:
        """Move bytes until every transfer is blocked; return the events (on the TLS socket,
        on the plain one) that would unblock them. Raises OSError when a side broke."""
        while True:
            progress = False  # bytes moved or a side ended: try everything again
            tls_wants = plain_wants = 0
            # hub -> pydevd, while pydevd still talks (after its EOF its answers are moot)
            if self._hub_open and self._pydevd_open and len(self._down) < LIMIT:
                try:
                    data = self._tls.recv(CHUNK)
                except ssl.SSLWantReadError:
                    tls_wants |= READ
                except ssl.SSLWantWriteError:
                    tls_wants |= WRITE
                else:
                    self._hub_open = bool(data)
                    self._down += data
                    progress = True
            if self._down and self._pydevd_open:
                try:
                    sent = self._plain.send(self._down)
                except BlockingIOError:
                    plain_wants |= WRITE
                else:
                    del self._down[:sent]
                    progress = True
            # pydevd -> hub, while the hub still listens
            if self._pydevd_open and self._hub_open and len(self._up) < LIMIT:
                try:
                    data = self._plain.recv(CHUNK)
                except BlockingIOError:
                    plain_wants |= READ
                else:
                    self._pydevd_open = bool(data)
                    self._up += data
                    progress = True
            if self._up and self._hub_open:
                try:
                    # A retry after SSLWant* passes the same leading bytes, at least as many,
                    # as OpenSSL requires (Python sets SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER).
                    sent = self._tls.send(self._up[:CHUNK])
                except ssl.SSLWantReadError:
                    tls_wants |= READ
                except ssl.SSLWantWriteError:
                    tls_wants |= WRITE
                else:
                    del self._up[:sent]
                    progress = True
            if not progress:
                return tls_wants, plain_wants


def _watch(selector: selectors.BaseSelector, sock: socket.socket, events: int) -> None:
    """Make ``selector`` watch ``sock`` for exactly ``events`` (none: not at all)."""
    try:
        current = selector.get_key(sock).events
    except KeyError:
        current = 0
    if events == current:
        return
    if not events:
        selector.unregister(sock)
    elif not current:
        selector.register(sock, events)
    else:
        selector.modify(sock, events)
