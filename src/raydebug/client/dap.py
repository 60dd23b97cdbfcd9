"""An asyncio DAP client: requests with awaited responses, events waited on by name.

Used by the demo, the tests and the benchmarks, and the base of the terminal debugger.
Every wait has a timeout; a dropped connection fails every pending wait at once.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import itertools
import socket
from collections.abc import Callable
from typing import Any

from ..errors import DapRequestError, RaydebugError, RemoteProtocolError, hub_unreachable
from ..protocol import NEED_DATA, DapConnection, Event, Request, Response

# DapRequestError lives in raydebug.errors; it is named here too, where callers of
# request() have always found it.
__all__ = ["DEFAULT_TIMEOUT", "DapClient", "DapRequestError"]

DEFAULT_TIMEOUT = 30.0


def _refused(response: Response, session_id: str | None = None) -> DapRequestError:
    return DapRequestError(response.command, response.message, response.body, session_id)


class DapClient:
    """One DAP connection. Create with :meth:`connect`; close with :meth:`close`."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._reader = reader
        self._writer = writer
        self._connection = DapConnection()
        self._seq = itertools.count(1)
        self._pending: dict[int, asyncio.Future[Response]] = {}
        self._events: collections.deque[Event] = collections.deque()
        self._arrival_waiters: set[asyncio.Future[None]] = set()  # see _take
        self._closed: BaseException | None = None
        self.reverse_requests: list[Request] = []
        # Events handed to a callback as they arrive (on the loop) instead of being queued
        # for wait_event: a long session would otherwise queue every `output` event forever.
        self.listeners: dict[str, Callable[[Event], None]] = {}
        # Called once with the reason when the connection closes.
        self.on_close: Callable[[BaseException], None] | None = None
        self._pump = asyncio.ensure_future(self._read_loop())

    @classmethod
    async def connect(cls, host: str, port: int, timeout: float = DEFAULT_TIMEOUT) -> DapClient:
        try:
            reader, writer = await asyncio.wait_for(asyncio.open_connection(host, port), timeout)
        except (OSError, TimeoutError) as error:
            raise hub_unreachable(f"{host}:{port}", error, saying="cannot connect to") from None
        sock = writer.get_extra_info("socket")
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return cls(reader, writer)

    async def request(self, command: str, arguments: dict[str, Any] | None = None,
                      timeout: float = DEFAULT_TIMEOUT) -> dict[str, Any]:
        """Send a request and return the response body; raises :class:`DapRequestError`."""
        response = await self.request_response(command, arguments, timeout)
        if not response.success:
            raise _refused(response)
        return response.body

    async def request_response(self, command: str, arguments: dict[str, Any] | None = None,
                               timeout: float = DEFAULT_TIMEOUT) -> Response:
        future = self.send_request(command, arguments)
        return await asyncio.wait_for(future, timeout)

    def send_request(self, command: str,
                     arguments: dict[str, Any] | None = None) -> asyncio.Future[Response]:
        """Send without waiting; the returned future gets the response."""
        if self._closed is not None:
            raise RemoteProtocolError(f"connection closed: {self._closed}")
        seq = next(self._seq)
        data = self._connection.send(Request(seq=seq, command=command, arguments=arguments or {}))
        future: asyncio.Future[Response] = asyncio.get_running_loop().create_future()
        self._pending[seq] = future
        self._writer.write(data)
        return future

    async def wait_event(self, name: str, timeout: float = DEFAULT_TIMEOUT,
                         **match: Any) -> Event:
        """Return (and consume) the first event called ``name`` whose body matches ``match``."""
        found = await self._take(
            self._events, lambda e: e.event == name and all(
                e.body.get(k) == v for k, v in match.items()), name, timeout)
        assert isinstance(found, Event)
        return found

    async def wait_reverse_request(self, command: str,
                                   timeout: float = DEFAULT_TIMEOUT) -> Request:
        """Return (and consume) the next reverse request ``command`` from the adapter."""
        found = await self._take(self.reverse_requests, lambda r: r.command == command,
                                 command, timeout)
        assert isinstance(found, Request)
        return found

    async def _take(self, received: Any, wanted: Any, what: str, timeout: float) -> Any:
        """Remove and return the first item of ``received`` that is ``wanted``, waiting for
        it; raises when the connection closes first, TimeoutError after ``timeout``.

        Cancel-safe: an item is removed only by the waiter that returns it, with no await in
        between, and a waiter cancelled before it returned never removes one (``wait_for``
        over a search could take the item and return it despite the cancel: a cluster IDE
        that stopped waiting for ``startDebugging`` lost the offer so)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while True:
            for item in received:
                if wanted(item):
                    received.remove(item)
                    return item
            if self._closed is not None:
                raise RemoteProtocolError(
                    f"connection closed while waiting for {what!r}: {self._closed}")
            remaining = deadline - loop.time()
            if remaining <= 0:
                raise TimeoutError(f"no {what!r} within {timeout:g}s")
            arrived: asyncio.Future[None] = loop.create_future()
            self._arrival_waiters.add(arrived)
            try:
                # asyncio.wait neither cancels `arrived` nor swallows our own cancellation.
                await asyncio.wait([arrived], timeout=remaining)
            finally:
                self._arrival_waiters.discard(arrived)

    def _wake_waiters(self) -> None:
        """Something arrived (or the connection closed): every waiter looks again."""
        for waiter in self._arrival_waiters:
            if not waiter.done():
                waiter.set_result(None)

    def respond(self, request: Request, body: dict[str, Any] | None = None,
                success: bool = True, message: str | None = None) -> None:
        """Answer a reverse request."""
        self._writer.write(self._connection.send(Response(
            seq=next(self._seq), request_seq=request.seq, command=request.command,
            success=success, message=message, body=body or {})))

    def events(self, name: str) -> list[Event]:
        """Events received so far with that name (not consumed)."""
        return [event for event in self._events if event.event == name]

    async def initialize(self, **arguments: Any) -> dict[str, Any]:
        return await self.request("initialize", {
            "clientID": "raydebug", "adapterID": "debugpy", "pathFormat": "path",
            "linesStartAt1": True, "columnsStartAt1": True, **arguments})

    async def attach(self, session: str | None = None, timeout: float = DEFAULT_TIMEOUT,
                     **arguments: Any) -> Event:
        """attach + configurationDone as IDEs do; return the ``stopped`` event."""
        if session is not None:
            arguments["raydebug"] = {**(arguments.get("raydebug") or {}), "session": session}
        # pydevd fails on an attach whose arguments are an empty object.
        arguments.setdefault("name", "raydebug")
        attach = self.send_request("attach", arguments)
        initialized = asyncio.ensure_future(self.wait_event("initialized", timeout))
        pending: set[asyncio.Future[Any]] = {attach, initialized}
        await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
        if attach.done() and not attach.result().success:
            initialized.cancel()
            raise _refused(attach.result(), session)
        await initialized
        await self.request("setExceptionBreakpoints", {"filters": []}, timeout)
        await self.request("configurationDone", timeout=timeout)
        response = await asyncio.wait_for(attach, timeout)
        if not response.success:
            raise _refused(response, session)
        return await self.wait_event("stopped", timeout)

    async def close(self) -> None:
        self._writer.close()
        self._pump.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await self._pump

    async def _read_loop(self) -> None:
        try:
            while True:
                data = await self._reader.read(256 * 1024)
                self._connection.receive_data(data)
                while (message := self._connection.next_event()) is not NEED_DATA:
                    await self._dispatch(message)
                if not data:
                    raise RemoteProtocolError("the peer closed the connection")
        except (RaydebugError, OSError) as error:
            self._closed = error
        finally:
            if self._closed is None:
                self._closed = RemoteProtocolError("client closed")
            if self.on_close is not None:
                self.on_close(self._closed)
            for future in self._pending.values():
                if not future.done():
                    future.set_exception(RemoteProtocolError(f"connection closed: {self._closed}"))
            self._wake_waiters()

    async def _dispatch(self, message: Any) -> None:
        if isinstance(message, Response):
            future = self._pending.pop(message.request_seq, None)
            if future is not None and not future.done():
                future.set_result(message)
        elif isinstance(message, Event) and message.event in self.listeners:
            self.listeners[message.event](message)
        elif isinstance(message, Event):
            self._events.append(message)
            self._wake_waiters()
        elif isinstance(message, Request):
            self.reverse_requests.append(message)
            self._wake_waiters()
