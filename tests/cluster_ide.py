"""A test client that behaves like an IDE with a cluster session (DAP child sessions)."""

from __future__ import annotations

import asyncio
import collections
import time
from typing import Any

from helpers import HubProcess
from raydebug.client.dap import DapClient, DapRequestError
from raydebug.protocol import Request, Response


class CountingClient(DapClient):
    """A DapClient that counts every response it receives, per request seq."""

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        self.responses: collections.Counter[int] = collections.Counter()

    async def _dispatch(self, message: Any) -> None:
        if isinstance(message, Response):
            self.responses[message.request_seq] += 1
        await super()._dispatch(message)


class ClusterIde:
    """Like VS Code: one cluster (parent) attach; every startDebugging opens a child
    connection at once, concurrently with the others."""

    def __init__(self, hub: HubProcess) -> None:
        self.hub = hub
        self.parent: DapClient | None = None
        self.children: list[tuple[CountingClient, int]] = []
        self.failed: list[str] = []  # why children could not attach
        self._opening: set[asyncio.Task[None]] = set()

    async def attach(self) -> None:
        self.parent = await DapClient.connect(*self.hub.client)
        await self.parent.initialize(supportsStartDebuggingRequest=True)
        attach = self.parent.send_request("attach", {"name": "cluster"})
        await self.parent.wait_event("initialized")
        await self.parent.request("configurationDone")
        assert (await attach).success

    async def wait_children(self, count: int, timeout: float) -> None:
        """Open a child for each startDebugging until ``count`` children have stopped."""
        assert self.parent is not None
        deadline = time.monotonic() + timeout
        while len(self.children) < count:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError(f"{len(self.children)} of {count} children stopped; "
                                   f"failed attaches: {self.failed}")
            waiting = asyncio.ensure_future(
                self.parent.wait_reverse_request("startDebugging", remaining))
            done, _ = await asyncio.wait({waiting, *self._opening}, timeout=remaining,
                                         return_when=asyncio.FIRST_COMPLETED)
            for task in done - {waiting}:
                self._opening.discard(task)  # type: ignore[arg-type]
                task.result()  # a child that failed to attach fails the test
            if waiting in done:
                request = waiting.result()
                self._opening.add(asyncio.ensure_future(self._open_child(request)))
            else:
                waiting.cancel()
        await asyncio.gather(*self._opening)

    async def _open_child(self, request: Request) -> None:
        assert self.parent is not None
        configuration = dict(request.arguments["configuration"])
        configuration.pop("request")
        child = await CountingClient.connect(*self.hub.client)
        await child.initialize()
        try:
            stopped = await child.attach(**configuration)
        except DapRequestError as error:  # an IDE shows it; the hub offers the child again
            self.failed.append(str(error))
            await child.close()
            return
        self.parent.respond(request)
        self.children.append((child, int(stopped.body["threadId"])))

    async def close(self) -> None:
        for child, _ in self.children:
            await child.close()
        if self.parent is not None:
            await self.parent.close()
