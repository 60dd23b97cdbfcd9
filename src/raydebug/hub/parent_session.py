"""The cluster session: one IDE attach that shows every paused process as a child session.

Theory of operation (DAP specification, "StartDebugging Request"). A client that attaches
without choosing a session, and whose ``initialize`` said ``supportsStartDebuggingRequest``,
gets a *parent* session served by the hub itself. For each paused process, now and later,
the hub sends the reverse request ``startDebugging{request: "attach", configuration}``; the
configuration is the client's own attach arguments (so the child connects back through the
same host, port and tunnel) plus ``"raydebug": {"session": id, "parent": key}``. The client
opens a new connection with it, which the hub routes like any other attach.

One child per process at a time: pydevd serves one client per process, and that client
sees all its paused threads. Breakpoints the user sets on the parent are kept here and sent
to each child's pydevd right after its attach. The parent has no threads of its own;
``terminate`` (then ``disconnect``) on it ends the parent only, and no worker is killed.
"""

from __future__ import annotations

import asyncio
import secrets
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..protocol import Event, Request
from ..session import SessionState
from .registry import HubSession, Registry

if TYPE_CHECKING:
    from .dap_proxy import ClientSession

# Requests whose arguments the parent keeps and replays to every child.
BREAKPOINT_REQUESTS = ("setBreakpoints", "setFunctionBreakpoints", "setExceptionBreakpoints")


@dataclass
class ParentBreakpoints:
    """The breakpoint requests a parent received, latest per source (or per kind)."""

    by_key: dict[str, Request] = field(default_factory=dict)

    def remember(self, request: Request) -> None:
        source = request.arguments.get("source") or {}
        key = f"{request.command}:{source.get('path') or source.get('name') or ''}"
        self.by_key[key] = request

    def requests(self) -> list[Request]:
        return list(self.by_key.values())


class ParentRegistry:
    """Live parents by key, so a child connection can find its parent's breakpoints."""

    def __init__(self) -> None:
        self._parents: dict[str, ParentBreakpoints] = {}

    def add(self) -> tuple[str, ParentBreakpoints]:
        key = secrets.token_hex(8)
        self._parents[key] = ParentBreakpoints()
        return key, self._parents[key]

    def remove(self, key: str) -> None:
        self._parents.pop(key, None)

    def breakpoints_for(self, key: object) -> list[Request]:
        parent = self._parents.get(str(key)) if key else None
        return parent.requests() if parent is not None else []


def child_name(session: HubSession) -> str:
    """``task (node, pid)``, ``Actor.method (node, pid)``, or ``file:line (host, pid)``."""
    record = session.record
    where = record.node_ip or record.host
    label = record.task_name or f"{record.file.rsplit('/', 1)[-1]}:{record.line}"
    if record.reason == "exception" and record.exception:
        label += f" [{record.exception.split(':', 1)[0]}]"
    return f"{label} ({where}, pid {record.pid})"


class ParentSession:
    """Serves the parent side of a cluster attach on an existing client connection."""

    def __init__(self, client: ClientSession, registry: Registry, parents: ParentRegistry,
                 attach: Request) -> None:
        self._client = client
        self._registry = registry
        self._parents = parents
        self._attach = attach
        self._key, self._breakpoints = parents.add()
        self._offered: dict[str, str] = {}  # process id -> session id offered to the client

    async def run(self) -> None:
        """Answer the parent's requests and offer children until the client leaves."""
        client = self._client
        client.respond(self._attach)
        client.send_event(Event(seq=0, event="initialized"))
        offering = asyncio.ensure_future(self._offer_children())
        try:
            while True:
                message = await client.next_client_message()
                if isinstance(message, Request):
                    if not self._answer(message):
                        return
        finally:
            offering.cancel()
            await asyncio.gather(offering, return_exceptions=True)
            self._parents.remove(self._key)

    def _answer(self, request: Request) -> bool:
        """Answer one request on the parent; False when the parent should end."""
        client = self._client
        if request.command in BREAKPOINT_REQUESTS:
            self._breakpoints.remember(request)
            client.respond(request, self._breakpoint_body(request))
        elif request.command == "threads":
            client.respond(request, {"threads": []})
        elif request.command == "terminate":
            # Ends the parent only: children, and their workers, go on. DAP: the client
            # then sends disconnect.
            client.respond(request)
            client.send_event(Event(seq=0, event="terminated"))
        elif request.command == "disconnect":
            client.respond(request)
            return False
        elif request.command in ("configurationDone", "pause", "continue"):
            client.respond(request)
        else:
            client.fail(request, f"{request.command!r}: this is the cluster session; select "
                                 "one of its child sessions")
        return True

    @staticmethod
    def _breakpoint_body(request: Request) -> dict[str, Any]:
        if request.command == "setExceptionBreakpoints":
            return {}
        wanted = request.arguments.get("breakpoints") or []
        # Not verified yet: they are verified in each process as its child attaches.
        return {"breakpoints": [{"verified": False, "line": b.get("line"),
                                 "message": "set in each paused process as it attaches"}
                                for b in wanted]}

    async def _offer_children(self) -> None:
        """Send startDebugging for every paused process not yet offered, as they come."""
        while True:
            for session in self._registry.all_sessions():
                self._maybe_offer(session)
            await self._registry.wait_for_change()

    def _maybe_offer(self, session: HubSession) -> None:
        process = session.process
        offered = self._offered.get(process.id)
        if offered is not None and offered in process.sessions:
            return  # its child is on its way, or attached
        if session.state is not SessionState.WAITING:
            return
        self._offered[process.id] = session.record.id
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
