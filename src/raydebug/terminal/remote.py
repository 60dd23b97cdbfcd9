"""The terminal debugger's line to one process: a DAP client on an event loop of its own
thread, called synchronously from the prompt's thread.

Why a thread: the prompt needs the main thread (readline's line editing, and Ctrl-C as
KeyboardInterrupt so that it can become a ``pause``), while the DAP client is asyncio. The
loop thread also prints the debuggee's output as it arrives and records every ``stopped``
event in :class:`Stops`, which the prompt's thread waits on.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field
from typing import Any, TypeVar

from ..client.dap import DEFAULT_TIMEOUT, DapClient
from ..errors import RaydebugError
from ..protocol import Event

T = TypeVar("T")


@dataclass(frozen=True)
class Stop:
    thread_id: int
    reason: str
    hit_ids: tuple[int, ...] = ()
    text: str = ""


@dataclass
class Stops:
    """Every stop and the end of the session, as the loop thread learns of them."""

    count: int = 0  # stops seen so far: a waiter wants one newer than it saw
    last: Stop | None = None
    stopped_threads: set[int] = field(default_factory=set)
    all_stopped: bool = False  # pydevd stops every thread at a stop (allThreadsStopped)
    ended: str | None = None  # why the session ended, once it has
    _changed: threading.Condition = field(default_factory=threading.Condition)

    def on_stopped(self, event: Event) -> None:
        body = event.body
        with self._changed:
            self.count += 1
            self.last = Stop(int(body.get("threadId", 0)), str(body.get("reason", "")),
                             tuple(body.get("hitBreakpointIds") or ()), str(body.get("text", "")))
            self.stopped_threads.add(self.last.thread_id)
            self.all_stopped = bool(body.get("allThreadsStopped"))
            self._changed.notify_all()

    def on_continued(self, event: Event) -> None:
        with self._changed:
            if event.body.get("allThreadsContinued", True):
                self.stopped_threads.clear()
                self.all_stopped = False
            else:
                self.stopped_threads.discard(int(event.body.get("threadId", 0)))

    def is_stopped(self, thread_id: int) -> bool:
        with self._changed:
            return self.all_stopped or thread_id in self.stopped_threads

    def on_end(self, reason: str) -> None:
        with self._changed:
            if self.ended is None:
                self.ended = reason
            self._changed.notify_all()

    def wait(self, newer_than: int, timeout: float | None = None) -> Stop | None:
        """The first stop after stop number ``newer_than``; None if the session ended first.
        Raises TimeoutError after ``timeout``; Ctrl-C raises KeyboardInterrupt here."""
        with self._changed:
            # A bounded wait per round keeps Ctrl-C prompt on every platform.
            waited = 0.0
            while self.count <= newer_than and self.ended is None:
                if timeout is not None and waited >= timeout:
                    raise TimeoutError("the debuggee did not stop")
                self._changed.wait(0.25)
                waited += 0.25
            return self.last if self.count > newer_than else None


class Remote:
    """One DAP connection through the hub to one process. Every method blocks (bounded);
    a dropped connection ends the session (:attr:`stops.ended`)."""

    def __init__(self, write_output: Callable[[str, str], None]) -> None:
        self.stops = Stops()
        self._write_output = write_output
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="raydebug-dap",
                                        daemon=True)
        self._thread.start()
        self._client: DapClient | None = None
        self.capabilities: dict[str, Any] = {}

    def call(self, coroutine: Coroutine[Any, Any, T], timeout: float = DEFAULT_TIMEOUT) -> T:
        return asyncio.run_coroutine_threadsafe(
            asyncio.wait_for(coroutine, timeout), self._loop).result()

    def connect(self, host: str, port: int) -> None:
        self._client = client = self.call(DapClient.connect(host, port))
        client.listeners.update(
            continued=self.stops.on_continued,
            output=self._on_output, terminated=lambda e: self.stops.on_end("the process has ended"),
            exited=lambda e: self.stops.on_end("the process exited"),
            # Not needed here; listening keeps them from piling up in the client's queue.
            thread=_ignore, module=_ignore, process=_ignore, loadedSource=_ignore,
            breakpoint=_ignore)
        client.on_close = lambda reason: self.stops.on_end(f"connection closed ({reason})")
        self.capabilities = self.call(client.initialize())

    def attach(self, session_id: str, client_token: str | None,
               timeout: float = DEFAULT_TIMEOUT) -> None:
        """Attach to the session; returns once the first stop is recorded in :attr:`stops`."""
        raydebug: dict[str, Any] = {"session": session_id}
        if client_token:
            raydebug["token"] = client_token
        self.call(self._attach(raydebug, timeout), timeout + 1)

    async def _attach(self, raydebug: dict[str, Any], timeout: float) -> None:
        client = self.client
        stopped = await client.attach(timeout=timeout, redirectOutput=True, raydebug=raydebug)
        # From here every stop goes to `stops` (no await in between: none is missed).
        self.stops.on_stopped(stopped)
        for event in client.events("stopped"):
            self.stops.on_stopped(event)
        client.listeners["stopped"] = self.stops.on_stopped

    @property
    def client(self) -> DapClient:
        if self._client is None:
            raise RaydebugError("not connected")
        return self._client

    def request(self, command: str, arguments: dict[str, Any] | None = None,
                timeout: float = DEFAULT_TIMEOUT) -> dict[str, Any]:
        """The response body; raises DapRequestError (success false) or RaydebugError."""
        return self.call(self.client.request(command, arguments, timeout), timeout + 1)

    def close(self) -> None:
        if self._client is not None:
            try:
                self.call(self._client.close(), 5.0)
            except (RaydebugError, TimeoutError, OSError):
                pass
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(5.0)
        if not self._thread.is_alive():
            self._loop.close()

    def _on_output(self, event: Event) -> None:
        category = str(event.body.get("category", "console"))
        if category != "telemetry":
            self._write_output(str(event.body.get("output", "")), category)


def _ignore(event: Event) -> None:
    pass
