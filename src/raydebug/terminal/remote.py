"""The terminal debugger's line to one process: a DAP client on an event loop of its own
thread, called synchronously from the prompt's thread.

Why a thread: the prompt needs the main thread (readline's line editing, and Ctrl-C as
KeyboardInterrupt so that it can become a ``pause``), while the DAP client is asyncio. The
loop thread also prints the debuggee's output as it arrives and records every ``stopped``
event, and the hub's ``raydebug/sessionStarted`` and ``raydebug/sessionEnded`` events (a
session's function returned: pydevd itself says nothing then), in :class:`Stops`, which the
prompt's thread waits on.

Threads stop and run one at a time, as in pdb: attaching asks pydevd not to suspend the
other threads at a stop (``stopAllThreadsOnSuspend: false``) and not to resume them for a
step (``steppingResumesAllThreads: false``), and ``continue`` says ``singleThread``; the
only way pydevd honours ``singleThread`` (``on_continue_request``).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
import time
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar

from ..client.dap import DEFAULT_TIMEOUT, DapClient, DapRequestError
from ..errors import RaydebugError
from ..protocol import Event

T = TypeVar("T")

SLOW_ATTACH = 2.0  # seconds without the first stop before attaching says why it waits
KEYS_POLL = 0.5  # seconds: a wait on a terminal looks at the keys (Ctrl-D) so often
THREAD_EXITED = "exited"  # a group session's thread whose process ended (Stops.on_thread)


@dataclass(frozen=True)
class Stop:
    thread_id: int
    reason: str
    hit_ids: tuple[int, ...] = ()
    text: str = ""


@dataclass(frozen=True)
class SessionEnd:
    """The hub's word that a session of the process ended (``reason``: the agent's, see
    ``protocol.control.END_REASONS``; ``returned``: repr of its function's return value)."""

    session_id: str
    thread: str
    reason: str
    returned: str = ""


# Noise pydevd prints into the debuggee's output, and what to say instead ("" for nothing).
PYDEVD_NOISE = {
    "Frame skipped from debugging during step-in.": "",
}
# Lines a Ray worker writes to its own stdout and stderr for Ray's log monitor, which strips
# them (ray._private.ray_constants.LOG_PREFIX_*): a worker says ":task_name:f" as each task
# starts, which the terminal showed twice as the next task of a reused worker began.
RAY_LOG_MARKERS = (":task_name:", ":actor_name:", ":job_id:")


@dataclass
class Stops:
    """Every stop and the end of the session, as the loop thread learns of them."""

    count: int = 0  # stops seen so far: a waiter wants one newer than it saw
    ends: list[SessionEnd] = field(default_factory=list)  # sessions ended, in order
    started: list[dict[str, Any]] = field(default_factory=list)  # sessions started since
    last: Stop | None = None
    # Threads stop one at a time (see the module's docstring): each has its own stopped
    # event; its allThreadsStopped is not believed (a replayed stop says true regardless).
    stopped_threads: set[int] = field(default_factory=set)
    ended: str | None = None  # why the session ended, once it has
    # The hub's connection dropped with no word of an end (a hub killed, or restarted by
    # Ray): the process may still be paused, under the same session id.
    lost: bool = False
    # Told (on the loop thread) why, the moment the session ends: the prompt may be waiting
    # for a line that no command is coming to read.
    on_ended: Callable[[str], None] | None = None
    _changed: threading.Condition = field(default_factory=threading.Condition)

    def on_stopped(self, event: Event) -> None:
        body = event.body
        thread_id = int(body.get("threadId", 0))
        with self._changed:
            if thread_id in self.stopped_threads:
                # Stopped already, and not resumed since: no news. pydevd says it again of a
                # thread that suspended before this client chose one stop per thread, 0.5 s
                # after any pause (docs/design.md#single-notification); taken as news, it
                # moved the prompt to that thread as if the pause had stopped it.
                return
            self.count += 1
            self.last = Stop(thread_id, str(body.get("reason", "")),
                             tuple(body.get("hitBreakpointIds") or ()), str(body.get("text", "")))
            self.stopped_threads.add(thread_id)
            self._changed.notify_all()

    def on_continued(self, event: Event) -> None:
        # Only the thread named: this client resumes one thread at a time (see the module's
        # docstring), and pydevd's allThreadsContinued is not true of it. A thread that
        # suspended before this client chose one stop per thread (`raydebug pause`) says
        # "all threads continued" as it resumes alone, and the prompt then said the
        # process's other stopped threads had run on (docs/design.md#single-notification).
        with self._changed:
            self.stopped_threads.discard(int(event.body.get("threadId", 0)))

    def resuming(self, thread_id: int) -> None:
        """This client is about to resume ``thread_id``: its next stop is news, even if
        pydevd's ``continued`` for it has not come yet."""
        with self._changed:
            self.stopped_threads.discard(thread_id)

    def is_stopped(self, thread_id: int) -> bool:
        with self._changed:
            return thread_id in self.stopped_threads

    def wait_stopped(self, thread_id: int, timeout: float) -> bool:
        """Whether thread ``thread_id`` is stopped, waiting up to ``timeout`` for its stop
        (False at once when the session has ended). Ctrl-C raises KeyboardInterrupt."""
        with self._changed:
            return self._changed.wait_for(
                lambda: thread_id in self.stopped_threads or self.ended is not None,
                timeout) and thread_id in self.stopped_threads

    def on_session_event(self, event: Event) -> None:
        body = event.body
        with self._changed:
            if event.event == "raydebug/sessionStarted":
                if isinstance(body.get("session"), dict):
                    self.started.append(body["session"])
            else:
                self.ends.append(SessionEnd(str(body.get("session", "")),
                                            str(body.get("thread", "")),
                                            str(body.get("reason", "")),
                                            str(body.get("returned", ""))))
            self._changed.notify_all()

    def on_thread(self, event: Event) -> None:
        """A group session's ``thread`` event: an exited thread (its process ended, or left
        the group) is no longer stopped, and its exit is a :class:`SessionEnd` of reason
        :data:`THREAD_EXITED` whose ``thread`` is its id."""
        if event.body.get("reason") != "exited":
            return
        thread_id = int(event.body.get("threadId", 0))
        with self._changed:
            self.stopped_threads.discard(thread_id)
            self.ends.append(SessionEnd("", str(thread_id), THREAD_EXITED))
            self._changed.notify_all()

    def on_end(self, reason: str, lost: bool = False) -> None:
        """The session is over for this connection, for ``reason`` (only the first is kept);
        ``lost``: the connection dropped, the session may go on without us."""
        with self._changed:
            first = self.ended is None
            if first:
                self.ended = reason
                self.lost = lost
            self._changed.notify_all()
        if first and self.on_ended is not None:
            self.on_ended(reason)

    def wait(self, newer_than: int, timeout: float | None = None,
             ends_seen: int | None = None) -> Stop | SessionEnd | None:
        """The first stop after stop number ``newer_than`` or, when ``ends_seen`` is given,
        the first session end after that many; None if the connection ended first.
        Raises TimeoutError after ``timeout``; Ctrl-C raises KeyboardInterrupt here."""
        with self._changed:
            # A bounded wait per round keeps Ctrl-C prompt on every platform.
            waited = 0.0
            while True:
                if self.count > newer_than:
                    return self.last
                if ends_seen is not None and len(self.ends) > ends_seen:
                    return self.ends[ends_seen]
                if self.ended is not None:
                    return None
                if timeout is not None and waited >= timeout:
                    raise TimeoutError("the debuggee did not stop")
                step = 0.25 if timeout is None else min(0.25, max(timeout - waited, 0.01))
                self._changed.wait(step)
                waited += step


class Debuggee(Protocol):
    """What the terminal debugger's commands need of their line to a process: the seam
    between them and the DAP connection. :class:`Remote` is the real one; a test can script
    one in memory (``tests/unit/test_terminal_flow.py``)."""

    @property
    def stops(self) -> Stops:
        """Every stop and session end seen, as they arrive."""

    @property
    def capabilities(self) -> dict[str, Any]:
        """The debug adapter's answer to ``initialize``."""

    def request(self, command: str, arguments: dict[str, Any] | None = None,
                timeout: float = DEFAULT_TIMEOUT) -> dict[str, Any]:
        """Send one DAP request and return its response's body, as :meth:`Remote.request`:
        raises DapRequestError (``success: false``), RaydebugError (the connection ended),
        TimeoutError, or KeyboardInterrupt (Ctrl-C while waiting)."""


class Remote:
    """One DAP connection through the hub to one process. Every method blocks (bounded);
    a dropped connection ends the session for it (:attr:`Stops.ended`, with
    :attr:`Stops.lost`)."""

    def __init__(self, write_output: Callable[[str, str], None],
                 process: str = "the process") -> None:
        self.stops = Stops()
        self._write_output = write_output
        self._process = process  # how the ends of the session name it ("process 1234")
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="raydebug-dap",
                                        daemon=True)
        self._thread.start()
        self._client: DapClient | None = None
        self._closing = False  # we close it: not a lost connection
        self.capabilities: dict[str, Any] = {}
        # A request whose wait Ctrl-C interrupted, until its answer comes.
        self.busy: tuple[str, concurrent.futures.Future[dict[str, Any]]] | None = None

    def call(self, coroutine: Coroutine[Any, Any, T], timeout: float = DEFAULT_TIMEOUT) -> T:
        return asyncio.run_coroutine_threadsafe(
            asyncio.wait_for(coroutine, timeout), self._loop).result()

    def connect(self, host: str, port: int) -> None:
        self._client = client = self.call(DapClient.connect(host, port))
        client.listeners.update(
            continued=self.stops.on_continued,
            output=self._on_output, terminated=lambda e: self.stops.on_end(self._ended()),
            exited=lambda e: self.stops.on_end(self._ended(e.body.get("exitCode"))),
            # Not needed here; listening keeps them from piling up in the client's queue.
            thread=_ignore, module=_ignore, process=_ignore, loadedSource=_ignore,
            breakpoint=_ignore)
        client.listeners["raydebug/sessionStarted"] = self.stops.on_session_event
        client.listeners["raydebug/sessionEnded"] = self.stops.on_session_event
        # A process that ends is said first (`terminated`), and so is the end of a session:
        # a close without either is the hub's going (killed, its Ray cluster stopped, or
        # restarted by Ray), and the process may still be paused under the same id.
        client.on_close = lambda reason: None if self._closing else self.stops.on_end(
            f"lost the connection to the hub at {host}:{port} (it stopped or restarted); "
            "the process may still be paused", lost=True)
        self.capabilities = self.call(client.initialize())

    def attach(self, session_id: str, client_token: str | None,
               timeout: float = DEFAULT_TIMEOUT,
               on_slow: Callable[[], None] | None = None,
               group: str | bool | None = None,
               left: Callable[[], bool] = lambda: False) -> None:
        """Attach to the session; returns once the first stop is recorded in :attr:`stops`.
        ``group`` (a selector's text, or True for every process): attach to the hub's
        group session instead (``session_id`` unused), whose first stop is the first
        process of the group to pause; its threads' exits are :attr:`Stops.ends` too
        (:meth:`Stops.on_thread`).

        A paused thread blocked in C stops only when it returns to Python, maybe never:
        ``on_slow`` is called once when the stop has not come after :data:`SLOW_ATTACH`
        seconds, so that the user is told why nothing happens. Ctrl-C (KeyboardInterrupt)
        stops waiting at any moment, and so does ``left()`` turning true (Ctrl-D typed:
        asked every :data:`KEYS_POLL` seconds), as KeyboardInterrupt too."""
        raydebug: dict[str, Any] = {"session": session_id} if group is None else {
            "group": group}
        if group is not None:
            self.client.listeners["thread"] = self.stops.on_thread
        if client_token:
            raydebug["token"] = client_token
        future = asyncio.run_coroutine_threadsafe(
            asyncio.wait_for(self._attach(raydebug, timeout), timeout + 1), self._loop)
        try:
            slow_at = time.monotonic() + SLOW_ATTACH
            while not concurrent.futures.wait([future], KEYS_POLL).done:
                if left():
                    raise KeyboardInterrupt
                if on_slow is not None and time.monotonic() >= slow_at:
                    on_slow()
                    on_slow = None
            future.result()
        except KeyboardInterrupt:
            # Cancelled, its task ends quietly: left to fail when the connection closes,
            # asyncio would print "Task exception was never retrieved" and a traceback.
            future.cancel()
            raise

    async def _attach(self, raydebug: dict[str, Any], timeout: float) -> None:
        client = self.client
        stopped = await client.attach(timeout=timeout, redirectOutput=True, raydebug=raydebug,
                                      stopAllThreadsOnSuspend=False,
                                      steppingResumesAllThreads=False)
        # From here every stop goes to `stops` (no await in between: none is missed).
        self.stops.on_stopped(stopped)
        for event in client.events("stopped"):
            self.stops.on_stopped(event)
        client.listeners["stopped"] = self.stops.on_stopped

    def _ended(self, exit_code: object = None) -> str:
        """Why the session ended, when the hub says its process did (DAP ``terminated``,
        or ``exited`` with the exit status)."""
        status = f" with status {exit_code}" if isinstance(exit_code, int) and exit_code else ""
        return f"{self._process} has ended{status}"

    @property
    def client(self) -> DapClient:
        if self._client is None:
            raise RaydebugError("not connected")
        return self._client

    def request(self, command: str, arguments: dict[str, Any] | None = None,
                timeout: float = DEFAULT_TIMEOUT) -> dict[str, Any]:
        """The response body; raises DapRequestError (success false) or RaydebugError (at
        once when the process ends meanwhile, even if its answer never comes).

        Ctrl-C (KeyboardInterrupt) stops waiting; the debuggee may still be busy with the
        request (an evaluation runs on in the paused thread): :attr:`busy` says so until
        its answer arrives."""
        if self.busy is not None:
            self._wait_busy()
        future = asyncio.run_coroutine_threadsafe(
            asyncio.wait_for(self.client.request(command, arguments, timeout), timeout + 1),
            self._loop)
        try:
            return self._result(future, command)
        except KeyboardInterrupt:
            self.busy = (command, future)
            raise

    def _result(self, future: concurrent.futures.Future[dict[str, Any]],
                command: str) -> dict[str, Any]:
        while True:
            try:
                return future.result(0.1)
            except DapRequestError:
                if self.stops.ended is not None:  # the hub's answer for a process that ended
                    raise RaydebugError(f"no answer to {command}: {self.stops.ended}") from None
                raise
            except concurrent.futures.TimeoutError:
                if self.stops.ended is not None:
                    future.cancel()
                    raise RaydebugError(f"no answer to {command}: {self.stops.ended}") from None

    def _wait_busy(self) -> None:
        """Before the next request, wait (Ctrl-C stops it) for an interrupted one to finish:
        pydevd answers a paused thread's requests one after another."""
        assert self.busy is not None
        command, future = self.busy
        if not future.done():
            self._write_output(f"(waiting for the debuggee to finish the interrupted "
                               f"{command}; Ctrl-C stops waiting)\n", "console")
        try:
            self._result(future, command)
        except (RaydebugError, TimeoutError, concurrent.futures.CancelledError):
            pass  # its answer is of no use now; only that it came
        self.busy = None

    def close(self) -> None:
        self._closing = True
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
        if category == "telemetry":
            return
        text = _without_ray_markers(str(event.body.get("output", "")))
        for noise, instead in PYDEVD_NOISE.items():
            if text.startswith(noise):
                text = instead
        if text.startswith("Evaluating: ") and "did not finish after" in text:
            # pydevd's 20-line advice on slow evaluations, in one line
            seconds = text.split("did not finish after", 1)[1].split("seconds")[0].strip()
            text = (f"(still evaluating after {seconds} s; Ctrl-C stops waiting, the "
                    "debuggee finishes it all the same)\n")
        if text:
            self._write_output(text, category)


def _ignore(event: Event) -> None:
    pass


def _without_ray_markers(text: str) -> str:
    """``text`` without its whole lines that are Ray's log markers."""
    if ":" not in text:
        return text
    return "".join(line for line in text.splitlines(keepends=True)
                   if not (line.startswith(RAY_LOG_MARKERS) and line.endswith("\n")))
