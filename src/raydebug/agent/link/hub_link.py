"""The process's connection to the hub: one thread, invisible to pydevd.

It keeps a *control* connection to the hub (reconnecting with backoff when it drops, then
registering the live process, if it is one, and every live session again). Messages from
the hub are dispatched by type (:attr:`HubLink._dispatch`): a new one is a handler method
and one line there. For each client that attaches it dials a *data*
connection, authenticates it, and hands the socket to pydevd: DAP then flows between the hub
and pydevd with no copy in this process (over TLS, through a relay thread: see
:mod:`raydebug.agent.link.relay`). Blocking sockets and one ``selectors`` loop: the paused threads
are parked anyway, and nothing here may touch an actor's event loop.
"""

from __future__ import annotations

import atexit
import collections
import contextlib
import os
import selectors
import socket
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol, TypeGuard

from ...errors import (
    AuthenticationError,
    HubUnreachableError,
    RaydebugError,
    RemoteProtocolError,
    hub_unreachable,
)
from ...protocol.control import (
    ROLE_CONTROL,
    ROLE_DATA,
    ArmBreakpoints,
    CancelPause,
    Challenge,
    ChannelFailed,
    ClientGone,
    ClientReady,
    CollectStacks,
    ControlMessage,
    ControlStream,
    HubClosing,
    Identify,
    OpenChannel,
    Pause,
    Refused,
    Register,
    SessionStarted,
    Welcome,
    encode_control,
)
from ...protocol.framing import NeedData
from ...protocol.handshake import WRONG_TOKEN, AgentHandshake
from .. import fork_guard
from ..config import AgentConfig
from ..debugger.facade import mark_invisible
from ..metadata import process_info
from ..report import say
from . import discovery

if TYPE_CHECKING:
    import ssl

CONNECT_TIMEOUT = 5.0
HANDSHAKE_TIMEOUT = 5.0
RETRY_DELAYS = (0.2, 0.5, 1.0, 2.0, 5.0)
STABLE_AFTER = 5.0  # seconds a control connection must last to reset the backoff
RECV_SIZE = 256 * 1024
SEND_AT_EXIT = 1.0  # seconds the interpreter's exit waits for what is still queued for the hub
LOST_IN_HANDSHAKE = "lost the connection in the handshake with the hub at"
TOKEN_CHANGED = ("the hub's token changed since this process linked (a hub started there "
                 "again with another token): start the hub with its former token, or this "
                 "process again")


class LinkHandler(Protocol):
    """What the link asks of the agent; called on the link thread."""

    def registration(self) -> Register | None: ...
    def live_sessions(self) -> list[SessionStarted]: ...
    def collect_stacks(self, request: CollectStacks) -> ControlMessage: ...
    def pause(self, request: Pause) -> ControlMessage: ...
    def cancel_pause(self, request: CancelPause) -> ControlMessage: ...
    def arm_breakpoints(self, breakpoints: dict[str, Any]) -> None: ...
    def prepare_client(self) -> None: ...
    def serve_client(self, sock: socket.socket) -> None: ...
    def on_client_attached(self) -> None: ...
    def on_client_ready(self) -> None: ...
    def on_client_detached(self) -> None: ...
    def on_hub_closing(self, reason: str) -> None: ...


def _nodelay(sock: socket.socket) -> socket.socket:
    if sock.family in (socket.AF_INET, socket.AF_INET6):  # (a test's dialer: a socketpair)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return sock


def _is_tls(sock: socket.socket) -> TypeGuard[ssl.SSLSocket]:
    """Whether ``sock`` is an ``ssl.SSLSocket``; without importing ssl into agents that
    do not use TLS."""
    return hasattr(sock, "pending")


Dial = Callable[[tuple[str, int], float], socket.socket]


def _create_connection(address: tuple[str, int], timeout: float) -> socket.socket:
    """``socket.create_connection``, given an ASCII host as bytes: ``getaddrinfo`` encodes
    a str host with the idna codec, whose import (``unicodedata``, ``stringprep``) took
    ~2-7 ms of the link thread's first connect, on the way to a first pause's listing."""
    host, port = address
    if not host.isascii():
        with fork_guard.importing():  # not in a fork's midst ("unknown encoding: idna")
            import encodings.idna  # noqa: F401
        return socket.create_connection((host, port), timeout)
    return socket.create_connection((host.encode(), port), timeout)  # type: ignore[arg-type]


class HubLink:
    """Owns every socket between this process and the hub. Thread-safe :meth:`post`.

    Seams for tests: ``dial(address, timeout)`` makes the connection (default
    ``socket.create_connection``, through :func:`_create_connection`), ``clock`` tells
    monotonic time, ``retry_delays`` and ``stable_after`` set the backoff (see :meth:`_run`).
    """

    def __init__(self, config: AgentConfig, handler: LinkHandler, *,
                 dial: Dial = _create_connection,
                 clock: Callable[[], float] = time.monotonic,
                 retry_delays: tuple[float, ...] = (),
                 stable_after: float | None = None) -> None:
        self._config = config
        self._handler = handler
        self._dial = dial
        self._clock = clock
        self._retry_delays = retry_delays or RETRY_DELAYS
        self._stable_after = STABLE_AFTER if stable_after is None else stable_after
        self._dispatch: dict[type[ControlMessage], Callable[[Any], None]] = {
            OpenChannel: lambda m: self._open_channel(m.channel),
            ClientReady: self._on_client_ready,
            ClientGone: self._on_client_gone,
            Refused: self._on_refused,
            CollectStacks: lambda m: self._answer(self._handler.collect_stacks(m)),
            Pause: lambda m: self._answer(self._handler.pause(m)),
            CancelPause: lambda m: self._answer(self._handler.cancel_pause(m)),
            HubClosing: self._on_hub_closing,
            ArmBreakpoints: lambda m: self._handler.arm_breakpoints(m.breakpoints),
        }
        # Where the hub is; resolved again on every reconnect when discovered through Ray
        # (a restarted hub may have moved).
        self._hub: tuple[str, int, str, str | None] | None = (
            None if config.discover
            else (str(config.hub_host), config.hub_port, config.token, config.hub_cert))
        self._stale_hub: object = None
        self._linked_to: set[str] = set()  # the addresses whose hub took our token
        self._hub_closed = False  # the last hub said it shut down for good (HubClosing)
        self._retired = False  # see retire()
        self._outbox: collections.deque[ControlMessage] = collections.deque()
        self._outbox_sent = threading.Condition()  # notified as the link thread empties it
        self._pid = os.getpid()  # a fork child's copy never waits on the parent's link
        self._wake_r, self._wake_w = socket.socketpair()
        self._wake_r.setblocking(False)
        self._control: socket.socket | None = None
        self._control_stream = ControlStream()
        self._channel: int | None = None  # the data channel pydevd is serving
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

    def post(self, message: ControlMessage) -> None:
        """Queue a message for the hub; sent in order once connected, dropped while not
        (the agent re-registers its live sessions after every reconnect)."""
        self._outbox.append(message)
        self._wake()

    def wait_sent(self, timeout: float) -> bool:
        """Block until every message posted so far has been written to the hub's connection
        (True), at most ``timeout`` seconds; False at once while there is no connection (they
        are dropped then). Runs as the interpreter exits (registered when the link starts):
        the link thread is a daemon, so a logpoint's line posted just before the end would
        otherwise stop in the queue with it."""
        if os.getpid() != self._pid:
            return False  # a fork child: its copy of the parent's link has no thread
        deadline = time.monotonic() + timeout
        with self._outbox_sent:
            while self._outbox and self._control is not None:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return False
                self._outbox_sent.wait(remaining)
            return not self._outbox

    def retire(self) -> None:
        """End the link for good: the link thread hangs up and returns. For the hub's own
        process (the Ray hub actor's worker, linked by the job's setup hook like any other):
        it is not debugged through itself, and must not look for a hub when its own closes
        (that would start a new hub actor on a node that is stopping)."""
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

    def _wake(self) -> None:
        try:
            self._wake_w.send(b"x")
        except (BlockingIOError, OSError):
            pass  # a wake-up is already pending

    # -- the link thread --------------------------------------------------------------------

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
            sock, leftover = self.handshake(ROLE_CONTROL, process=process_info())
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
        self._control_stream = ControlStream()
        if leftover:
            self._control_stream.receive_data(leftover)
        self._selector.register(sock, selectors.EVENT_READ, "control")
        self._outbox.clear()
        try:
            self._arm_first(sock)
            registration = self._handler.registration()
            for message in ([registration] if registration else []) \
                    + list(self._handler.live_sessions()):
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

    def handshake(self, role: str, *, process: dict[str, object] | None = None,
                  channel: int = 0) -> tuple[socket.socket, bytes]:
        """Connect to the hub and authenticate both ways; return the socket and the bytes
        read past the Welcome.

        The hub must prove it knows the token (see :mod:`raydebug.protocol.handshake`)
        before anything goes to it: on a control connection ``process`` is then sent as
        the first message; a data socket is returned only then, for pydevd, with nothing
        read past the Welcome (those bytes are pydevd's). With a pinned certificate the
        connection is TLS, and a hub presenting another certificate is refused before
        anything is sent.
        Raises :class:`HubUnreachableError`, :class:`AuthenticationError` (the hub refused
        us, or :class:`HubAuthenticationError`: it could not prove itself) or
        :class:`ProtocolVersionError`.
        """
        host, port, token, cert = self._resolve_hub()
        address = f"{host}:{port}"
        try:
            sock = _nodelay(self._dial((host, port), CONNECT_TIMEOUT))
        except OSError as error:
            raise hub_unreachable(address, error) from None
        try:
            sock.settimeout(HANDSHAKE_TIMEOUT)
            if cert is not None:
                with fork_guard.importing():
                    from ...tls import wrap_pinned

                sock = wrap_pinned(sock, cert, address)
            shake = AgentHandshake(token, role, channel=channel, hub=f"the hub at {address}")
            greeting = _read_greeting(sock, shake, address, tls=cert is not None,
                                      linked=address in self._linked_to)
            if isinstance(greeting, Refused):  # e.g. too many connections from this host
                raise HubUnreachableError(f"the hub at {address} refused us: {greeting.reason}")
            sock.sendall(shake.send())
            reply = _read_event(sock, shake, address, exact=role == ROLE_DATA)
            if isinstance(reply, Refused):
                changed = reply.reason == WRONG_TOKEN and address in self._linked_to
                raise AuthenticationError(f"the hub at {address} refused us: "
                                          f"{TOKEN_CHANGED if changed else reply.reason}")
            self._linked_to.add(address)
            # The hub is proven: only now does it learn who we are.
            if process is not None:
                sock.sendall(encode_control(Identify(process=process)))
            sock.settimeout(None)
            return sock, shake.take_buffered()
        except OSError as error:
            sock.close()
            raise hub_unreachable(address, error, LOST_IN_HANDSHAKE) from None
        except RaydebugError:
            sock.close()
            raise

    @property
    def hub_address(self) -> str:
        return f"{self._hub[0]}:{self._hub[1]}" if self._hub else self._config.hub_address

    def _on_hub_closing(self, message: HubClosing) -> None:
        """The hub went away for good (its Ray node stops): until a hub is there again, only
        look for one; starting one would put it on the node that is stopping."""
        self._hub_closed = True
        self._handler.on_hub_closing(message.reason)

    def _resolve_hub(self) -> tuple[str, int, str, str | None]:
        """The hub's worker address, token and pinned certificate (None: no TLS); raises
        :class:`HubUnreachableError`."""
        if self._hub is None:
            self._hub = discovery.installed().find_hub(stale=self._stale_hub,
                                                       start=not self._hub_closed)
            self._stale_hub = self._hub  # replaced on success below, kept if it fails
        return self._hub

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

    def _flush_outbox(self) -> None:
        if self._control is None:
            return
        try:
            while self._outbox:
                self._control.sendall(encode_control(self._outbox[0]))
                self._outbox.popleft()  # only once written (see wait_sent)
        except OSError:
            self._drop_control()
        with self._outbox_sent:
            self._outbox_sent.notify_all()

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
                self._handle(message)
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

    def _handle_control_input(self) -> None:
        try:
            while True:
                message = self._control_stream.next_event()
                if isinstance(message, NeedData):
                    return
                self._handle(message)
                if self._control is None:
                    return  # the handler dropped the connection
        except RaydebugError as error:
            say(f"dropping the hub connection: {error}")
            self._drop_control()

    def _handle(self, message: ControlMessage) -> None:
        """One message from the hub, to its handler. Raises :class:`RaydebugError` (the
        hub's fault) and ``OSError`` (the connection's); a bug of ours is said, and the link
        (and the process) go on."""
        handle = self._dispatch.get(type(message))
        if handle is None:
            raise RemoteProtocolError(f"unexpected {message.TYPE!r} from the hub")
        try:
            handle(message)
        except (RaydebugError, OSError):
            raise
        except Exception as error:
            say(f"internal error answering the hub's {message.TYPE} "
                f"({type(error).__name__}: {error})")

    def _on_client_ready(self, message: ClientReady) -> None:
        if self._channel == message.channel:
            self._handler.on_client_ready()

    def _on_client_gone(self, message: ClientGone) -> None:
        if self._channel == message.channel:
            self._client_gone()

    def _on_refused(self, message: Refused) -> None:  # a session the hub cannot take
        say(f"the hub at {self.hub_address} refused a session: {message.reason}")

    def _answer(self, message: ControlMessage) -> None:
        """Send an answer to the hub now (we are on the link thread)."""
        self._outbox.append(message)
        self._flush_outbox()

    def _drop_control(self) -> None:
        if self._control is None:
            return
        self._client_gone()  # a client reaches us only through the hub
        self._selector.unregister(self._control)
        self._control.close()
        self._control = None
        with self._outbox_sent:
            self._outbox_sent.notify_all()  # nothing more leaves (see wait_sent)
        # Not when it said goodbye (HubClosing), nor when this process left its cluster
        # (ray.shutdown() took the cluster's hub with it): nothing was lost.
        if not self._hub_closed and not discovery.installed().left_cluster():
            say(f"lost the connection to the hub at {self.hub_address}; reconnecting")
        self.last_error = "lost"

    def _open_channel(self, channel: int) -> None:
        """Dial a data connection for ``channel`` and give it to pydevd.

        pydevd is made ready first (on a first pause it may still be starting on the pausing
        thread: this waits for it, bounded by the start itself), so that a failure reaches
        the hub as ``ChannelFailed`` with its reason before any data connection exists.
        """
        self._client_gone()  # pydevd serves one client at a time; the hub enforces it too
        try:
            self._handler.prepare_client()
        except Exception as error:  # the debugger cannot start: the session stays listed
            self._fail_channel(channel, f"the debugger could not start in pid {os.getpid()}: "
                                        f"{type(error).__name__}: {error}")
            return
        try:
            sock, _ = self.handshake(ROLE_DATA, channel=channel)  # read nothing past Welcome
        except RaydebugError as error:
            self._fail_channel(channel, str(error))
            return
        try:
            if _is_tls(sock):  # pydevd's threads must not share one SSL object
                from .relay import start_relay

                sock, _ = start_relay(sock)  # the relay closes the TLS socket when sock closes
            self._handler.serve_client(sock)
        except Exception as error:  # pydevd refused it: tell the client, keep the link
            # The reason first, then the close: the hub then has it when the channel drops.
            self._fail_channel(channel, f"pydevd failed: {type(error).__name__}: {error}")
            sock.close()
            return
        self._channel = channel
        self._handler.on_client_attached()

    def _fail_channel(self, channel: int, reason: str) -> None:
        """Send ``ChannelFailed`` now (we are on the link thread: no wake-up needed)."""
        self._outbox.append(ChannelFailed(channel=channel, reason=reason))
        self._flush_outbox()

    def _client_gone(self) -> None:
        if self._channel is not None:
            self._channel = None
            self._handler.on_client_detached()


def _read_greeting(sock: socket.socket, shake: AgentHandshake, address: str,
                   tls: bool, linked: bool = False) -> Challenge | Refused:
    """The hub's first message. A hub started with --tls waits for a TLS handshake that a
    plaintext worker never starts, then closes: say so, rather than "connection closed".
    ``linked``: a hub there took us without TLS before (one stopping or starting now)."""
    try:
        event = _read_event(sock, shake, address)
    except (OSError, HubUnreachableError) as error:
        if tls:
            raise
        reason = "timed out" if isinstance(error, TimeoutError) else "closed the connection"
        hint = ("it may be stopping or starting (started again with --tls, it needs "
                "RAYDEBUG_HUB_CERT in this process)" if linked else
                "if it runs with --tls, set RAYDEBUG_HUB_CERT to the certificate fingerprint "
                "it prints")
        raise HubUnreachableError(
            f"the hub at {address} {reason} before its challenge: {hint}") from None
    assert not isinstance(event, Welcome)  # the handshake takes no welcome before a hello
    return event


def _read_event(sock: socket.socket, shake: AgentHandshake, address: str,
                exact: bool = False) -> Challenge | Welcome | Refused:
    """The handshake's next event; with ``exact``, read byte by byte, so nothing after it
    is consumed. Raises what :meth:`AgentHandshake.next_event` raises, OSError, and
    :class:`HubUnreachableError` when the hub closes the connection."""
    size = 1 if exact else RECV_SIZE
    while True:
        event = shake.next_event()
        if not isinstance(event, NeedData):
            return event
        data = sock.recv(size)
        if not data:
            raise HubUnreachableError(f"the hub at {address} closed the connection during "
                                      "the handshake")
        shake.receive_data(data)
