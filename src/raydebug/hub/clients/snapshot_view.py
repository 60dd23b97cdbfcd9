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

In a cluster session. Snapshots never clutter a live debugging session: a cluster attach
offers them as child sessions only when its configuration asks (``"raydebug":
{"snapshots": true}``, :func:`wants_snapshots`): :func:`offer_snapshots` sends a
``startDebugging`` for the newest :data:`KEPT_OFFERED` snapshots kept at the attach and for
each one kept after it, a window of them at a time as the parent's offers of paused
processes, with the parent's key, so that the child is vouched for as a session's child is
(one connection per snapshot viewed, bounded by the store's capacity) and its offer counted
as taken (:meth:`.ClusterSessions.child_attached`).
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import time

from ...errors import PeerClosed
from ...protocol import Request
from ...protocol.snapshot_session import SnapshotSession
from ...snapshots.format import Snapshot
from ..snapshot_store import SnapshotStore
from .cluster_sessions import ClusterSessions
from .peer import ClientPeer
from .stream import ClientStream

CLOSE_GRACE = 5.0  # seconds a client has to close its connection after its disconnect
KEPT_OFFERED = 10  # of the snapshots kept when a cluster attach asks for them, the newest


def wanted_id(attach: Request) -> str | None:
    """The session or snapshot id an attach names (``"raydebug": {"session": id}``)."""
    settings = attach.arguments.get("raydebug")
    wanted = settings.get("session") if isinstance(settings, dict) else None
    return None if wanted is None else str(wanted)


def wants_snapshots(attach: Request) -> bool:
    """Whether a cluster attach asks to be offered snapshots (``"snapshots": true``)."""
    settings = attach.arguments.get("raydebug")
    return isinstance(settings, dict) and settings.get("snapshots") is True


def child_name(snapshot: Snapshot) -> str:
    """``snapshot: task [ValueError] (node, pid 42)``: what an IDE lists the child as."""
    process = snapshot.process
    top = snapshot.frames[0] if snapshot.frames else None
    label = process.get("task_name") or (
        f"{top.path.rsplit('/', 1)[-1]}:{top.line}" if top else snapshot.id)
    if snapshot.exception is not None:
        label += f" [{snapshot.exception.type_name}]"
    where = process.get("node_ip") or process.get("host") or "?"
    return f"snapshot: {label} ({where}, pid {process.get('pid')})"


async def offer_snapshots(client: ClientPeer, store: SnapshotStore, attach: Request,
                          parents: ClusterSessions, parent: str, window: int,
                          offer_timeout: float) -> None:
    """Offer the cluster attach's client the newest :data:`KEPT_OFFERED` kept snapshots,
    then each one kept later, as child sessions of ``parent``; runs until cancelled (the
    parent left). At most ``window`` offers are on their way at once (sent, their child not
    attached yet, for at most ``offer_timeout`` seconds), as the parent's offers of paused
    processes are: a burst of failures does not open more connections at once than the
    per-address limit lets in."""
    kept = store.all()
    seen = {snapshot.id for snapshot in kept}
    waiting = collections.deque(kept[-KEPT_OFFERED:])  # to offer, oldest first
    on_their_way: dict[str, float] = {}  # snapshot id -> when offered (monotonic)
    version = store.version
    while True:
        now = time.monotonic()
        taken = parents.attached_children(parent)
        on_their_way = {snapshot_id: at for snapshot_id, at in on_their_way.items()
                        if snapshot_id not in taken and now - at < offer_timeout}
        while waiting and len(on_their_way) < window:
            snapshot = waiting.popleft()
            _offer(client, snapshot, attach, parent)
            on_their_way[snapshot.id] = now
        expiry = (min(on_their_way.values()) + offer_timeout - now
                  if waiting and on_their_way else None)
        changes = [asyncio.ensure_future(store.wait_for_version_after(version)),
                   asyncio.ensure_future(parents.wait_for_child(parent))]
        try:
            await asyncio.wait(changes, timeout=expiry, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for change in changes:
                change.cancel()
        if store.version != version:
            version = store.version
            for snapshot in store.all():
                if snapshot.id not in seen:
                    seen.add(snapshot.id)
                    waiting.append(snapshot)


def _offer(client: ClientPeer, snapshot: Snapshot, attach: Request, parent: str) -> None:
    configuration = {
        **attach.arguments, "request": "attach", "name": child_name(snapshot),
        # The client's own raydebug settings (its token) go to the child too.
        "raydebug": {**(attach.arguments.get("raydebug") or {}), "session": snapshot.id,
                     "parent": parent}}
    client.send_request(Request(seq=0, command="startDebugging", arguments={
        "request": "attach", "configuration": configuration}))


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
