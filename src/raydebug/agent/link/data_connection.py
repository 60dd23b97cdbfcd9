"""The data connections the link opens for clients, and the one pydevd is serving.

When the hub asks (``OpenDataConnection``), the link dials a data connection, authenticates it, and
hands the socket to pydevd: DAP then flows between the hub and pydevd with no copy in this
process (over TLS, through a relay thread: :mod:`.relay`). pydevd serves one client at a
time: opening a new data connection ends the client of the one before. Everything here runs
on the link thread.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Callable
from typing import TYPE_CHECKING, TypeGuard

from ...errors import RaydebugError
from ...protocol.control import ClientGone, ClientReady, ControlMessage, DataConnectionFailed

if TYPE_CHECKING:
    import ssl

    from .owner import LinkOwner

OpenData = Callable[[int], socket.socket]


def is_tls(sock: socket.socket) -> TypeGuard[ssl.SSLSocket]:
    """Whether ``sock`` is an ``ssl.SSLSocket``; without importing ssl into agents that
    do not use TLS."""
    return hasattr(sock, "pending")


class DataConnections:
    """Opens a data connection per client the hub announces; knows which one pydevd serves.

    ``open_data(connection)`` dials and authenticates the hub's data connection number
    ``connection`` (raises :class:`RaydebugError`); ``answer(message)`` sends a control
    message to the hub now.
    """

    def __init__(self, owner: LinkOwner, open_data: OpenData,
                 answer: Callable[[ControlMessage], None]) -> None:
        self._owner = owner
        self._open_data = open_data
        self._answer = answer
        self._serving: int | None = None  # the data connection pydevd is serving

    def open(self, connection: int) -> None:
        """Dial data connection ``connection`` and give it to pydevd.

        The connection is dialled first, then pydevd is made ready: on a first pause pydevd
        may still be starting on the pausing thread, and the dial's round trips go on
        meanwhile (docs/design.md#first-pause); waiting for the start is bounded by the
        start itself. A start that fails reaches the hub as ``DataConnectionFailed`` with its
        reason, then the data connection closes (the hub has the reason when it sees the
        close).
        """
        self.client_gone()  # pydevd serves one client at a time; the hub enforces it too
        try:
            sock = self._open_data(connection)  # read nothing past Welcome
        except RaydebugError as error:
            self._fail(connection, str(error))
            return
        try:
            self._owner.prepare_client()
        except Exception as error:  # the debugger cannot start: the session stays listed
            self._fail(connection, f"the debugger could not start in pid {os.getpid()}: "
                                   f"{type(error).__name__}: {error}")
            sock.close()
            return
        try:
            if is_tls(sock):  # pydevd's threads must not share one SSL object
                from .relay import start_relay

                sock, _ = start_relay(sock)  # the relay closes the TLS socket when sock closes
            self._owner.serve_client(sock)
        except Exception as error:  # pydevd refused it: tell the client, keep the link
            # The reason first, then the close: the hub then has it when the connection drops.
            self._fail(connection, f"pydevd failed: {type(error).__name__}: {error}")
            sock.close()
            return
        self._serving = connection
        self._owner.on_client_attached()

    def on_client_ready(self, message: ClientReady) -> None:
        if self._serving == message.channel:
            self._owner.on_client_ready()

    def on_client_gone(self, message: ClientGone) -> None:
        if self._serving == message.channel:
            self.client_gone()

    def client_gone(self) -> None:
        """pydevd's client left (or the control connection, through which it came, did)."""
        if self._serving is not None:
            self._serving = None
            self._owner.on_client_detached()

    def _fail(self, connection: int, reason: str) -> None:
        self._answer(DataConnectionFailed(channel=connection, reason=reason))
