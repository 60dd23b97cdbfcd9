"""Data connections a client asked for, from its request until its client has set one up.

Theory of operation. A client connection asks a process for a data connection with a fresh
id (:meth:`PendingDataConnections.expect`, then ``OpenDataConnection`` on the process's control
connection); the agent dials the hub, and the listener hands the authenticated connection
to the future of that id (:meth:`PendingDataConnections.deliver`). The agent reports a
failure with a ``DataConnectionFailed`` control message (:meth:`PendingDataConnections.fail`):
before the data connection arrives that fails the wait for it; after (pydevd refused the
socket, so the agent closed it), the client sees the data connection close first and asks
:meth:`PendingDataConnections.wait_failure` for the reason.
"""

from __future__ import annotations

import asyncio
import secrets
from collections.abc import Callable
from dataclasses import dataclass, field

from ...errors import ChannelFailedError
from .data_receiver import DataReceiver


@dataclass
class DataConnection:
    """An agent's data connection, handed to the client that requested it: its transport
    (to write to pydevd) and what receives pydevd's messages. The client sets ``done``
    when it no longer needs it (the listener's task for the connection then ends).
    ``answer_due`` is called as a request is written to pydevd (see
    :mod:`raydebug.hub.busy_poll`)."""

    transport: asyncio.Transport
    receiver: DataReceiver
    answer_due: Callable[[], None] = lambda: None
    done: asyncio.Event = field(default_factory=asyncio.Event)


class PendingDataConnections:
    """Data connections a client asked a process to open, by id, from the request until
    the client has set the connection up (then it calls :meth:`forget`). One per hub;
    each connection it delivers calls ``answer_due`` as a request is written to it."""

    def __init__(self, answer_due: Callable[[], None] = lambda: None) -> None:
        self.answer_due = answer_due
        self._connections: dict[int, asyncio.Future[DataConnection]] = {}
        self._failures: dict[int, asyncio.Future[str]] = {}

    def expect(self) -> tuple[int, asyncio.Future[DataConnection]]:
        """A new data connection id, and the future the connection will be delivered to
        (it raises :class:`ChannelFailedError` when the agent reports a failure first)."""
        connection_id = secrets.randbits(62)
        loop = asyncio.get_running_loop()
        connection: asyncio.Future[DataConnection] = loop.create_future()
        self._connections[connection_id] = connection
        self._failures[connection_id] = loop.create_future()
        return connection_id, connection

    def forget(self, connection_id: int) -> None:
        """The client is done waiting for ``connection_id`` and for its failure."""
        self._connections.pop(connection_id, None)
        self._failures.pop(connection_id, None)

    def deliver(self, connection_id: int, data: DataConnection) -> bool:
        """Hand a data connection to the client expecting it; False when none is."""
        connection = self._connections.pop(connection_id, None)
        if connection is None or connection.done():
            return False
        connection.set_result(data)
        return True

    def fail(self, connection_id: int, reason: str) -> None:
        """The data connection cannot be served, for ``reason``; nothing when it is not
        pending."""
        connection = self._connections.pop(connection_id, None)
        if connection is not None and not connection.done():
            connection.set_exception(ChannelFailedError(reason))
        failure = self._failures.get(connection_id)
        if failure is not None and not failure.done():
            failure.set_result(reason)

    async def wait_failure(self, connection_id: int, timeout: float) -> str | None:
        """The reason the agent gave for failing ``connection_id``, waiting up to
        ``timeout`` seconds for it; None when it gave none (or the id is not pending)."""
        failure = self._failures.get(connection_id)
        if failure is None:
            return None
        try:
            return await asyncio.wait_for(asyncio.shield(failure), timeout)
        except TimeoutError:
            return None
