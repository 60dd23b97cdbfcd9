"""A DAP client that behaves like VS Code with a cluster session (DAP child sessions), for
tests and benchmarks."""

from __future__ import annotations

import asyncio
from typing import Any

from raydebug.client.dap import DapClient
from raydebug.protocol import Response

from .processes import HubProcess


class IdeLikeClient:
    """Behaves like VS Code: one parent connection; each startDebugging it receives opens a
    new connection to the same host:port with the given configuration."""

    def __init__(self, hub: HubProcess) -> None:
        self.hub = hub
        self.parent: DapClient | None = None
        self.children: list[tuple[DapClient, dict[str, Any], int]] = []

    async def open_cluster(self) -> asyncio.Future[Response]:
        """Connect the parent, initialize and send the cluster attach; returns once the hub
        said ``initialized`` (set breakpoints now, then ``configurationDone``), with the
        future of the attach's response."""
        self.parent = await DapClient.connect(*self.hub.client)
        await self.parent.initialize(supportsStartDebuggingRequest=True)
        attach = self.parent.send_request("attach", {
            "name": "cluster", "connect": {"host": self.hub.client[0],
                                           "port": self.hub.client[1]}})
        await self.parent.wait_event("initialized")
        return attach

    async def attach_cluster(self, breakpoints: dict[str, list[int]]) -> None:
        attach = await self.open_cluster()
        assert self.parent is not None
        for path, lines in breakpoints.items():
            await self.parent.request("setBreakpoints", {
                "source": {"path": path}, "breakpoints": [{"line": n} for n in lines]})
        await self.parent.request("configurationDone")
        assert (await attach).success
        assert (await self.parent.request("threads"))["threads"] == []

    async def next_child(self, timeout: float = 30) -> tuple[DapClient, dict[str, Any], int]:
        """The next child session the hub offers (``startDebugging``), attached; waits up to
        ``timeout`` for the offer (a Ray worker's first pause can take minutes under load)."""
        assert self.parent is not None
        request = await self.parent.wait_reverse_request("startDebugging", timeout)
        configuration = request.arguments["configuration"]
        assert request.arguments["request"] == "attach"
        assert configuration["connect"] == {"host": self.hub.client[0], "port": self.hub.client[1]}
        host, port = configuration["connect"]["host"], configuration["connect"]["port"]
        child = await DapClient.connect(host, port)
        await child.initialize()
        arguments = {k: v for k, v in configuration.items() if k not in ("request",)}
        stopped = await child.attach(**arguments)
        self.parent.respond(request)
        entry = (child, configuration, int(stopped.body["threadId"]))
        self.children.append(entry)
        return entry
