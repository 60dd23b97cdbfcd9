"""A snapshot served to one DAP client: the read-only session, on the client's connection.

Theory of operation. A client that attaches naming a snapshot's id (``"raydebug":
{"session": "x1a2b..."}``, as it names a session's) is served here until it leaves: the hub
is the debug adapter and there is no process behind it (the snapshot outlived it). Each of
the client's requests goes to the sans-IO
:class:`~raydebug.protocol.snapshot_session.SnapshotSession`, and what it answers is written
back, its one response first; nothing waits on anything but the client, so every request is
answered at once.

Ends. After the client's ``disconnect`` (answered) the client closes the connection (DAP's
clients do; one that does not is let go after :data:`CLOSE_GRACE`) and
:meth:`SnapshotView.run` returns; a client that drops first raises
:class:`~raydebug.errors.PeerClosed` out of it. Closing at once would make a client that
reads the close as news (``raydebug attach`` takes it for a hub gone away) say so.
The snapshot stays in the hub's store either way: viewing it changes nothing, and several
clients may view one snapshot at once.
"""

from __future__ import annotations

import asyncio
import contextlib

from ...errors import PeerClosed
from ...protocol import Request
from ...protocol.snapshot_session import SnapshotSession
from ...snapshots.format import Snapshot
from .stream import ClientStream

CLOSE_GRACE = 5.0  # seconds a client has to close its connection after its disconnect


def wanted_id(attach: Request) -> str | None:
    """The session or snapshot id an attach names (``"raydebug": {"session": id}``)."""
    settings = attach.arguments.get("raydebug")
    wanted = settings.get("session") if isinstance(settings, dict) else None
    return None if wanted is None else str(wanted)


class SnapshotView:
    """Serves one snapshot to one client connection, from its attach until it leaves."""

    def __init__(self, client: ClientStream, snapshot: Snapshot) -> None:
        self._client = client
        self._session = SnapshotSession(snapshot)

    async def run(self, attach: Request) -> None:
        """Answer ``attach`` and every request after it until the client's ``disconnect``.
        Raises :class:`~raydebug.errors.PeerClosed` when the client leaves without one."""
        self._answer(attach)
        while not self._session.over:
            message = await self._client.next_client_message()
            if isinstance(message, Request):
                self._answer(message)
                if self._client.backed_up():  # a client that asks and does not read
                    await self._client.drain_quietly()
        await self._client.drain_quietly()
        with contextlib.suppress(PeerClosed, TimeoutError):
            await asyncio.wait_for(self._answer_until_closed(), CLOSE_GRACE)

    async def _answer_until_closed(self) -> None:
        """After ``disconnect``: each request still gets its one answer (an error)."""
        while True:
            message = await self._client.next_client_message()
            if isinstance(message, Request):
                self._answer(message)

    def _answer(self, request: Request) -> None:
        for message in self._session.handle(request):
            self._client.send(message)
