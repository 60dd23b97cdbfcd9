"""The process's link to the hub: one thread, invisible to pydevd.

Theory of operation. The link thread keeps a *control connection* to the hub: it dials and
authenticates it (:mod:`.dial`), arms the cluster's breakpoints the hub sends first, then
registers the live process, if it is one, and every live session again. It sleeps in one
``selectors`` loop until the hub speaks or another thread posts a message (:mod:`.outbox`).
Each message from the hub goes to its handler through one table (:mod:`.dispatch`); for each
client that attaches the link opens a *data connection* and hands it to pydevd
(:mod:`.data_connection`). When the control connection drops the link reconnects, with
backoff (:meth:`HubLink._run`), and a data connection's client is gone with it. Blocking
sockets: the paused threads are parked anyway, and nothing here may touch an actor's event
loop.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import selectors
import socket
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from ...errors import RaydebugError
from ...process_record import IDENTIFY_FIELDS
from ...protocol.control import (
    ROLE_CONTROL,
    ROLE_DATA,
    ArmBreakpoints,
    ControlConnection,
    ControlMessage,
    HubClosing,
    Refused,
    encode_control,
)
from ...protocol.framing import NeedData
from ..config import AgentConfig
from ..debugger.facade import mark_invisible
from ..report import say
from . import discovery, live
from .data_connection import DataConnections
from .dial import HANDSHAKE_TIMEOUT, RECV_SIZE, Dial, Dialer, create_connection
from .dispatch import ControlDispatch
from .outbox import Outbox

if TYPE_CHECKING:
    from .owner import LinkOwner

RETRY_DELAYS = (0.2, 0.5, 1.0, 2.0, 5.0)
STABLE_AFTER = 5.0  # seconds a control connection must last to reset the backoff
SEND_AT_EXIT = 1.0  # seconds the interpreter's exit waits for what is still queued for the hub


class HubLink:
    """Owns every socket between this process and the hub. Thread-safe :meth:`post`.

    Seams for tests: ``dial(address, timeout)`` makes the connection (default
    :func:`~.dial.create_connection`), ``clock`` tells monotonic time, ``retry_delays`` and
    ``stable_after`` set the backoff (see :meth:`_run`).
    """

    def __init__(self, config: AgentConfig, owner: LinkOwner, *,
                 dial: Dial = create_connection,
                 clock: Callable[[], float] = time.monotonic,
                 retry_delays: tuple[float, ...] = (),
                 stable_after: float | None = None) -> None:
        self._config = config
        self._owner = owner
        self._dialer = Dialer(dial)
        self._clock = clock
        self._retry_delays = retry_delays or RETRY_DELAYS
        self._stable_after = STABLE_AFTER if stable_after is None else stable_after
        self._data = DataConnections(owner, self._open_data, self._answer)
        self._dispatch = ControlDispatch(owner, self._data, self._answer,
                                         on_refused=self._on_refused,
                                         on_hub_closing=self._on_hub_closing)
        # Where the hub is; resolved again on every reconnect when discovered through Ray
        # (a restarted hub may have moved).
        self._hub: tuple[str, int, str, str | None] | None = (
            None if config.discover
            else (str(config.hub_host), config.hub_port, config.token, config.hub_cert))
        self._stale_hub: object = None
        self._hub_closed = False  # the last hub said it shut down for good (HubClosing)
        self._retired = False  # see retire()
        self._outbox = Outbox()
        self._wake_r, self._wake_w = socket.socketpair()
        self._wake_r.setblocking(False)
        self._control: socket.socket | None = None
        self._control_stream = ControlConnection()
        self._selector = selectors.DefaultSelector()
        self._selector.register(self._wake_r, selectors.EVENT_READ, "wake")
        self._thread: threading.Thread | None = None
        self._start_lock = threading.Lock()
        self.last_error: str | None = None
        self.attempted = threading.Event()  # set once the first connection attempt is over
        # A pause that waits for the first attempt says its failure in its own notice: one
        # line, not two (see Agent._wait_for_client). Kept until the pause takes it: a
        # pause that took long (pydevd's start, under load) may look after later attempts
        # failed otherwise (an impostor that left), and the first error must still be said.
        self.pause_reports_first_error = False
        self._unsaid_error: str | None = None
        self._unsaid_lock = threading.Lock()

    # -- called from any thread -------------------------------------------------------------

    def take_first_error(self) -> str | None:
        """The first attempt's error, kept for the pause that started the link to say (None:
        there was none, or it was taken); whoever takes it says it."""
        with self._unsaid_lock:
            error, self._unsaid_error = self._unsaid_error, None
            return error

    def start(self) -> None:
        """Start the link thread once; it connects in the background."""
        with self._start_lock:
            if self._thread is None:
                thread = threading.Thread(target=self._run, name="raydebug-link", daemon=True)
                mark_invisible(thread)
                thread.start()
                self._thread = thread
                atexit.register(self.wait_sent, SEND_AT_EXIT)

    def run_here(self) -> None:
        """Be the link thread: serve the link on the calling thread (invisible to pydevd),
        for good, unless another thread already does. A live process's link thread
        (see :func:`raydebug.agent.start_live_link`) calls this."""
        with self._start_lock:
            if self._thread is not None:
                return
            self._thread = threading.current_thread()
            atexit.register(self.wait_sent, SEND_AT_EXIT)
        self._run()

    def post(self, message: ControlMessage, keep: bool = False) -> None:
        """Queue a message for the hub; sent in order once connected, dropped while not
        (the agent re-registers its live sessions after every reconnect), unless ``keep``
        (a snapshot): then it waits for a connection (see :class:`.outbox.Outbox`)."""
        self._outbox.put(message, keep)
        self._wake()

    def wait_kept_sent(self, timeout: float) -> bool:
        """Block until every kept message posted so far has been written (True), at most
        ``timeout`` seconds, connected or not: a process that failed before its link
        connected waits this long at its exit for its snapshot to leave."""
        if threading.current_thread() is self._thread:
            return False
        return self._outbox.wait_sent(timeout, connected=self._outbox.waiting_kept)

    @property
    def connected(self) -> bool:
        """Whether the control connection to the hub is up now."""
        return self._control is not None

    def wait_sent(self, timeout: float) -> bool:
        """Block until every message posted so far has been written to the hub's connection
        (True), at most ``timeout`` seconds; False at once while there is no connection (they
        are dropped then), and in a fork child. Runs as the interpreter exits (registered
        when the link starts): the link thread is a daemon, so a logpoint's line posted just
        before the end would otherwise stop in the queue with it. On the link thread itself,
        False at once: it writes the queue after this."""
        if threading.current_thread() is self._thread:
            return False
        return self._outbox.wait_sent(timeout, connected=lambda: self._control is not None)

    def retire(self) -> None:
        """End the link for good: the link thread hangs up and returns. For the hub's own
        process (the Ray hub actor's Ray worker, linked by the job's setup hook like any
        other): it is not debugged through itself, and must not look for a hub when its own
        closes (that would start a new hub actor on a node that is stopping)."""
        self._retired = True
        self._wake()

    def close_inherited(self) -> None:
        """In a fork child: close this process's copies of the parent's sockets. ``close()``
        without ``shutdown()`` leaves the parent's connections as they are."""
        for sock in (self._control, self._wake_r, self._wake_w):
            if sock is not None:
                sock.close()
        self._control = None
        self._selector.close()  # the epoll instance itself stays the parent's

    @property
    def hub_address(self) -> str:
        return f"{self._hub[0]}:{self._hub[1]}" if self._hub else self._config.hub_address

    def _wake(self) -> None:
        try:
            self._wake_w.send(b"x")
        except (BlockingIOError, OSError):
            pass  # a wake-up is already pending

    # -- the link thread: connecting --------------------------------------------------------

    def _run(self) -> None:
        attempt = 0
        while not self._retired:
            if self._connect_control() and self._control is not None:
                connected = self._clock()
                self._serve(until=None)  # until the control connection drops
                if self._clock() - connected >= self._stable_after:
                    attempt = 0  # the hub was there: reconnect at once
                    continue
                # Dropped right after the handshake (a hub that closes at once, a proxy):
                # back off as for a failed connect, or the link would redial in a loop.
            delay = self._retry_delays[min(attempt, len(self._retry_delays) - 1)]
            attempt += 1
            self._serve(until=self._clock() + delay)

    def _connect_control(self) -> bool:
        """One attempt; True when connected. Never raises: a bug of ours counts as a failed
        attempt (said once), so the link thread lives on and retries."""
        try:
            return self._try_connect_control()
        except Exception as error:
            text = f"internal error connecting to the hub ({type(error).__name__}: {error})"
            if text != self.last_error:
                say(f"{text}; retrying in the background (pid {os.getpid()})")
            self.last_error = text
            self.attempted.set()
            return False

    def _try_connect_control(self) -> bool:
        try:
            if self._config.discover:
                self._hub = None  # look it up again: it may have moved since
            identify = live.process_record().to_dict(IDENTIFY_FIELDS)
            sock, leftover = self._dialer.handshake(*self._resolve_hub(), ROLE_CONTROL,
                                                    process=identify)
        except RaydebugError as error:
            first = not self.attempted.is_set()
            if first and self.pause_reports_first_error:
                with self._unsaid_lock:
                    self._unsaid_error = str(error)
            else:
                quiet = self._hub_closed or discovery.installed().left_cluster()
                if str(error) != self.last_error and not quiet:  # closed: it said goodbye
                    say(f"{error}; retrying in the background (pid {os.getpid()})")
            self.last_error = str(error)
            self.attempted.set()
            return False
        if self.last_error is not None:
            say(f"connected to the hub at {self.hub_address}")
        self.last_error = None
        self._control = sock
        self._control_stream = ControlConnection()
        if leftover:
            self._control_stream.receive_data(leftover)
        self._selector.register(sock, selectors.EVENT_READ, "control")
        self._outbox.clear()
        try:
            self._arm_first(sock)
            registration = self._owner.registration()
            for message in ([registration] if registration else []) \
                    + list(self._owner.live_sessions()):
                sock.sendall(encode_control(message))
        except (OSError, RaydebugError) as error:
            if isinstance(error, RaydebugError):
                say(f"dropping the hub connection: {error}")
            self._drop_control()
            return False
        self._stale_hub = None
        self._hub_closed = False
        self.attempted.set()
        self._handle_control_input()
        return True

    def _resolve_hub(self) -> tuple[str, int, str, str | None]:
        """The address of the hub's listener for agents, its token and its pinned
        certificate (None: no TLS); raises :class:`HubUnreachableError`."""
        if self._hub is None:
            self._hub = discovery.installed().find_hub(stale=self._stale_hub,
                                                       start=not self._hub_closed)
            self._stale_hub = self._hub  # replaced on success below, kept if it fails
        return self._hub

    def _open_data(self, connection: int) -> socket.socket:
        """Dial and authenticate the hub's data connection ``connection``, reading nothing
        past the Welcome (what follows is pydevd's)."""
        sock, _ = self._dialer.handshake(*self._resolve_hub(), ROLE_DATA, connection=connection)
        return sock

    def _arm_first(self, sock: socket.socket) -> None:
        """Before registering: handle what the hub sends as this process identifies itself,
        up to the cluster's breakpoints (``ArmBreakpoints``, an empty set when there are
        none). A process the hub lists as live then has them armed: their import takes this
        thread 20-40 ms, and a program told "linked" may hit one at once. Raises
        :class:`RemoteProtocolError`, or ``OSError`` when the hub sends nothing in time."""
        deadline = self._clock() + HANDSHAKE_TIMEOUT
        while True:
            message = self._control_stream.next_event()
            if not isinstance(message, NeedData):
                self._dispatch.handle(message)
                if isinstance(message, ArmBreakpoints) or self._control is None:
                    return
                continue
            sock.settimeout(max(deadline - self._clock(), 0.001))
            try:
                data = sock.recv(RECV_SIZE)
            finally:
                sock.settimeout(None)
            if not data:
                raise ConnectionResetError("the hub closed the connection")
            self._control_stream.receive_data(data)

    # -- the link thread: serving -----------------------------------------------------------

    def _serve(self, until: float | None) -> None:
        """Serve sockets until ``until`` (a monotonic time) passes, or, with None, until the
        control connection drops."""
        while True:
            timeout = None if until is None else max(0.0, until - self._clock())
            for key, _events in self._selector.select(timeout):
                try:
                    self._on_readable(key)
                except OSError:
                    self._drop_control()
            if self._retired:
                self._hub_closed = True  # nothing is lost: hang up quietly
                self._drop_control()
                return
            if (self._control is None) if until is None else self._clock() >= until:
                return

    def _on_readable(self, key: selectors.SelectorKey) -> None:
        if key.data == "wake":
            with contextlib.suppress(BlockingIOError):
                self._wake_r.recv(4096)
            self._flush_outbox()
        elif key.data == "control":
            assert self._control is not None
            data = self._control.recv(RECV_SIZE)
            if not data:
                self._drop_control()
                return
            pending = getattr(self._control, "pending", None)  # TLS: bytes select() misses
            while pending is not None and pending() > 0:
                data += self._control.recv(pending())
            self._control_stream.receive_data(data)
            self._handle_control_input()

    def _handle_control_input(self) -> None:
        """Handle every message read so far, together (see
        :meth:`~.dispatch.ControlDispatch.handle_read`); what came before a malformed one
        too, then the connection is dropped."""
        read: list[ControlMessage] = []
        failure = None
        try:
            while not isinstance(message := self._control_stream.next_event(), NeedData):
                read.append(message)
        except RaydebugError as error:
            failure = error
        try:
            self._dispatch.handle_read(read, lambda: self._control is not None)
        except RaydebugError as error:
            failure = failure or error
        if failure is not None and self._control is not None:
            say(f"dropping the hub connection: {failure}")
            self._drop_control()

    def _flush_outbox(self) -> None:
        if self._control is None:
            return
        try:
            self._outbox.write_to(self._control)
        except OSError:
            self._drop_control()
        self._outbox.notify()

    def _answer(self, message: ControlMessage) -> None:
        """Send a message to the hub now (we are on the link thread: no wake-up needed)."""
        self._outbox.put(message)
        self._flush_outbox()

    def _on_refused(self, message: Refused) -> None:  # a session the hub cannot take
        say(f"the hub at {self.hub_address} refused a session: {message.reason}")

    def _on_hub_closing(self, message: HubClosing) -> None:
        """The hub went away for good (its Ray node stops): until a hub is there again, only
        look for one; starting one would put it on the node that is stopping."""
        self._hub_closed = True
        self._owner.on_hub_closing(message.reason)

    def _drop_control(self) -> None:
        if self._control is None:
            return
        self._data.client_gone()  # a client reaches us only through the hub
        self._selector.unregister(self._control)
        self._control.close()
        self._control = None
        self._outbox.notify()  # nothing more leaves (see wait_sent)
        # Not when it said goodbye (HubClosing), nor when this process left its cluster
        # (ray.shutdown() took the cluster's hub with it): nothing was lost.
        if not self._hub_closed and not discovery.installed().left_cluster():
            say(f"lost the connection to the hub at {self.hub_address}; reconnecting")
        self.last_error = "lost"
