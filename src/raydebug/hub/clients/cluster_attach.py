"""The cluster attach: one IDE attach that shows every paused process as a child session.

Theory of operation (DAP specification, "StartDebugging Request"). A client that attaches
without choosing a session, and whose ``initialize`` said ``supportsStartDebuggingRequest``,
gets a *parent* session served by the hub itself. For each paused process, now and later,
the hub sends the reverse request ``startDebugging{request: "attach", configuration}``; the
configuration is the client's own attach arguments (so the child connects back through the
same host, port and tunnel) plus ``"raydebug": {"session": id, "parent": key}``. The client
opens a new connection with it, which the hub routes like any other attach.

One child per process at a time: pydevd serves one client per process, and that client
sees all its paused threads. Breakpoints the user sets on the parent go to the hub's one
breakpoint set (:mod:`.cluster_sessions`), beside ``raydebug break``'s and the web page's:
every linked process arms them without pydevd and pauses as a session when one is hit, and
every attached DAP session's pydevd (a child session's among them) is sent the whole set
as it attaches and each time it changes, beside its client's own breakpoints. Each request
on the parent is answered once, by its ``<command>_request`` method; any other command
fails. A logpoint's text comes back as an ``output`` event on every parent, prefixed with
the process. The parent has no threads of its own; ``terminate`` (then ``disconnect``) on
it ends the parent only, and no process is killed. Kept snapshots are offered as children
too, only when the attach asks (``"raydebug": {"snapshots": true}``: :mod:`.snapshot_view`).

Children and the per-address connection limit. Every child connection comes from the IDE's
address. A child counts toward the limit only until its attach is accepted (then it is
bound to its process: see :class:`raydebug.hub.net.PeerLimit`), and the parent offers at
most :data:`OFFER_WINDOW` children at a time that have not attached yet, so a cluster of any
size never holds more than that many counted connections. When the hub refuses one of this
address's connections anyway, the parent's debug console says so (:meth:`.ClusterSessions.tell`).

The client connection starts a cluster attach and hands it the client as a
:class:`.peer.ClientPeer`: this module does not know the connection's class.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass

from ...protocol import Event, Request
from ...session import SessionState
from ..entries import HubSession
from ..registry import Registry
from ..snapshot_store import SnapshotStore
from .cluster_sessions import ClusterSessions, local_root_of
from .peer import ClientPeer
from .snapshot_view import offer_snapshots, wants_snapshots

# Children offered and not attached yet, at most; an offer the client has not taken within
# OFFER_TIMEOUT seconds stops holding its place (it is not offered again while it waits).
OFFER_WINDOW = 16
OFFER_TIMEOUT = 10.0
# A session whose child attached and left it paused (the attach failed, the connection
# dropped) is offered again, this many times in all.
OFFER_TRIES = 3


def child_name(session: HubSession) -> str:
    """``task (node, pid)``, ``Actor.method (node, pid)``, or ``file:line (host, pid)``."""
    record = session.record
    where = record.node_ip or record.host
    label = record.task_name or f"{record.file.rsplit('/', 1)[-1]}:{record.line}"
    if record.reason == "exception" and record.exception:
        label += f" [{record.exception.split(':', 1)[0]}]"
    return f"{label} ({where}, pid {record.pid})"


class ClusterAttach:
    """Serves the parent side of a cluster attach on an existing client connection."""

    def __init__(self, client: ClientPeer, registry: Registry, parents: ClusterSessions,
                 attach: Request, snapshots: SnapshotStore | None = None) -> None:
        self._client = client
        self._snapshots = snapshots if wants_snapshots(attach) else None  # offered, if asked
        self._registry = registry
        self._parents = parents
        self._attach = attach
        self._key = parents.add(client.peer_host, client.say_now, client.send_event)
        self._local_root = local_root_of(attach)
        self._offered: dict[str, _Offer] = {}  # by process id: the last offer to the client

    async def run(self) -> None:
        """Answer the parent's requests and offer children until the client leaves."""
        client = self._client
        client.respond(self._attach)
        client.send_event(Event(seq=0, event="initialized"))
        offering = [asyncio.ensure_future(self._offer_children())]
        if self._snapshots is not None:
            offering.append(asyncio.ensure_future(
                offer_snapshots(client, self._snapshots, self._attach, self._parents,
                                self._key, OFFER_WINDOW, OFFER_TIMEOUT)))
        try:
            while True:
                message = await client.next_client_message()
                if isinstance(message, Request) and not self._answer(message):
                    return
        finally:
            for task in offering:
                task.cancel()
            await asyncio.gather(*offering, return_exceptions=True)
            self._parents.remove(self._key)

    def _answer(self, request: Request) -> bool:
        """Answer one request on the parent, once, by its ``<command>_request`` method (as
        debugpy's adapter dispatches); False when the parent should end."""
        answer = getattr(self, f"{request.command}_request", None)
        if answer is None:
            self._client.fail(request, f"{request.command!r}: this is the cluster session; "
                                       "select one of its child sessions")
            return True
        return bool(answer(request))

    def setBreakpoints_request(self, request: Request) -> bool:
        self._parents.answer_edit(self._client, self._key, request, self._local_root)
        return True

    setFunctionBreakpoints_request = setBreakpoints_request
    setExceptionBreakpoints_request = setBreakpoints_request

    def threads_request(self, request: Request) -> bool:
        self._client.respond(request, {"threads": []})
        return True

    def terminate_request(self, request: Request) -> bool:
        # Ends the parent only: children, and their processes, go on. DAP: the client then
        # sends disconnect.
        self._client.respond(request)
        self._client.send_event(Event(seq=0, event="terminated"))
        return True

    def disconnect_request(self, request: Request) -> bool:
        self._client.respond(request)
        return False

    def configurationDone_request(self, request: Request) -> bool:
        self._client.respond(request)
        return True

    pause_request = continue_request = configurationDone_request

    async def _offer_children(self) -> None:
        """Send startDebugging for every paused process not yet offered, as they come, at
        most :data:`OFFER_WINDOW` on their way at once."""
        while True:
            now = time.monotonic()
            on_their_way = sum(1 for offer in self._offered.values()
                               if offer.on_its_way(now))
            for session in self._registry.all_sessions():
                if on_their_way >= OFFER_WINDOW:
                    break
                if self._maybe_offer(session, now):
                    on_their_way += 1
            # An offer that times out frees its place without any change in the registry.
            expiries = [offer.at + OFFER_TIMEOUT - now for offer in self._offered.values()
                        if offer.on_its_way(now)]
            try:
                await asyncio.wait_for(self._registry.wait_for_change(),
                                       max(min(expiries), 0.01) if expiries else None)
            except TimeoutError:
                pass

    def _maybe_offer(self, session: HubSession, now: float) -> bool:
        """Offer ``session`` unless its process has a child on its way or attached; True
        when offered. A child that attached and then left without resuming the process
        (its attach failed, or its connection dropped) is offered again."""
        if session.state is not SessionState.WAITING:
            return False
        process = session.process
        offered = self._offered.get(process.id)
        tries = 1
        if offered is not None and offered.session.record.id in process.sessions:
            if not offered.left() or offered.tries >= OFFER_TRIES:
                return False  # its child is on its way (or was, and never came), or gave up
            tries = offered.tries + 1
        self._offered[process.id] = _Offer(session, now, session.attaches, tries)
        configuration = {
            **self._attach.arguments,
            "request": "attach",
            "name": child_name(session),
            # The client's own raydebug settings (its token) go to the child too.
            "raydebug": {**(self._attach.arguments.get("raydebug") or {}),
                         "session": session.record.id, "parent": self._key},
        }
        self._client.send_request(Request(seq=0, command="startDebugging", arguments={
            "request": "attach", "configuration": configuration}))
        return True


@dataclass
class _Offer:
    """A startDebugging sent for ``session``, at ``at`` (monotonic seconds), when it had
    had ``attaches`` clients."""

    session: HubSession
    at: float
    attaches: int
    tries: int  # offers of this session so far, this one included

    def on_its_way(self, now: float) -> bool:
        """Offered, no client attached since, and not given up on."""
        return (self.session.attaches == self.attaches
                and self.session.state is SessionState.WAITING
                and now - self.at < OFFER_TIMEOUT)

    def left(self) -> bool:
        """A client attached since the offer, and the session is waiting again."""
        return (self.session.attaches > self.attaches
                and self.session.state is SessionState.WAITING)
