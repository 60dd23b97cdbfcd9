"""A DAP client that behaves like VS Code with a cluster session (DAP child sessions), for
tests and benchmarks."""

from __future__ import annotations

import asyncio
import os
import subprocess
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

    async def next_child(self, timeout: float = 30, *,
                         while_running: subprocess.Popen[str] | None = None,
                         ) -> tuple[DapClient, dict[str, Any], int]:
        """The next child session the hub offers (``startDebugging``), attached; waits up to
        ``timeout`` for the offer (a Ray worker's first pause can take minutes under load),
        or, with ``while_running``, until that process (the job that should pause) ends:
        then fails at once with its exit code and its stderr's tail, not after ``timeout``
        with nothing to go on."""
        assert self.parent is not None
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while True:
            remaining = deadline - loop.time()
            try:
                request = await self.parent.wait_reverse_request(
                    "startDebugging", remaining if while_running is None else min(remaining, 1))
                break
            except TimeoutError:
                if loop.time() >= deadline:
                    raise
            assert while_running is not None
            if while_running.poll() is not None:
                raise AssertionError(
                    f"the job ended (exit code {while_running.returncode}) before a child "
                    f"session was offered; its stderr ends:\n{_pending_text(while_running)}")
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


def _pending_text(process: subprocess.Popen[str], limit: int = 5000) -> str:
    """The tail of what an ended ``process`` left in its stderr pipe, without waiting: the
    processes it started (a Ray cluster's) may hold the pipe open after it ended."""
    if process.stderr is None:
        return ""
    descriptor = process.stderr.fileno()
    os.set_blocking(descriptor, False)
    chunks = []
    try:
        while chunk := os.read(descriptor, 1 << 16):
            chunks.append(chunk)
    except BlockingIOError:
        pass
    return b"".join(chunks).decode(errors="replace")[-limit:]
