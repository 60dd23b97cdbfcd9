"""A scripted client of a cluster session, for tests that run one in memory."""

from __future__ import annotations

import asyncio
from typing import Any

from raydebug.protocol import Event, Request


class ScriptedParent:
    """What a :class:`~raydebug.hub.clients.cluster_attach.ClusterAttach` sees of its client
    (a :class:`~raydebug.hub.clients.peer.ClientPeer`): it sends ``requests``, then what
    :meth:`send` is given, and keeps every answer as ``(command, body)`` (a failure's body
    is ``"failed: <text>"``) and every event."""

    def __init__(self, requests: list[Request]) -> None:
        self.peer_host = "127.0.0.1"
        self.responses: list[tuple[str, Any]] = []
        self.events: list[Event] = []
        self._incoming: asyncio.Queue[Request] = asyncio.Queue()
        for request in requests:
            self.send(request)

    def send(self, request: Request) -> None:
        self._incoming.put_nowait(request)

    def respond(self, request: Request, body: dict[str, Any] | None = None) -> None:
        self.responses.append((request.command, body))

    def fail(self, request: Request, text: str) -> None:
        self.responses.append((request.command, f"failed: {text}"))

    def send_event(self, event: Event) -> None:
        self.events.append(event)

    def send_request(self, request: Request) -> None:
        pass

    def say_now(self, text: str) -> None:
        pass

    async def next_client_message(self) -> Request:
        return await self._incoming.get()
