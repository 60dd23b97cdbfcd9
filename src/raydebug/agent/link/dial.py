"""Dialling the hub: a TCP connection, TLS pinned to the hub's certificate, and the
handshake both ways (:mod:`raydebug.protocol.handshake`), for a control or a data connection.

The hub proves it knows the token before this process tells it anything: only then is the
process's record sent (control connection) or the socket returned for pydevd (data
connection). Blocking sockets, on the link thread.
"""

from __future__ import annotations

import socket
from collections.abc import Callable

from ...errors import AuthenticationError, HubUnreachableError, RaydebugError, hub_unreachable
from ...protocol.control import ROLE_DATA, Challenge, Identify, Refused, Welcome, encode_control
from ...protocol.framing import NeedData
from ...protocol.handshake import WRONG_TOKEN, AgentHandshake
from .. import fork_guard

CONNECT_TIMEOUT = 5.0
HANDSHAKE_TIMEOUT = 5.0
RECV_SIZE = 256 * 1024
LOST_IN_HANDSHAKE = "lost the connection in the handshake with the hub at"
TOKEN_CHANGED = ("the hub's token changed since this process linked (a hub started there "
                 "again with another token): start the hub with its former token, or this "
                 "process again")

Dial = Callable[[tuple[str, int], float], socket.socket]


def create_connection(address: tuple[str, int], timeout: float) -> socket.socket:
    """``socket.create_connection``, given an ASCII host as bytes: ``getaddrinfo`` encodes
    a str host with the idna codec, whose import (``unicodedata``, ``stringprep``) is kept
    off the link thread's first connect (docs/design.md#agent-import)."""
    host, port = address
    if not host.isascii():
        with fork_guard.importing():  # not in a fork's midst ("unknown encoding: idna")
            import encodings.idna  # noqa: F401
        return socket.create_connection((host, port), timeout)
    return socket.create_connection((host.encode(), port), timeout)  # type: ignore[arg-type]


class Dialer:
    """Makes authenticated connections to the hub; remembers which hubs took our token.

    ``dial(address, timeout)`` makes the TCP connection (a test's seam; default
    :func:`create_connection`).
    """

    def __init__(self, dial: Dial = create_connection) -> None:
        self._dial = dial
        self._linked_to: set[str] = set()  # the addresses whose hub took our token

    def handshake(self, host: str, port: int, token: str, cert: str | None, role: str, *,
                  process: dict[str, object] | None = None,
                  connection: int = 0) -> tuple[socket.socket, bytes]:
        """Connect to the hub at ``host:port`` and authenticate both ways; return the socket
        and the bytes read past the Welcome.

        The hub must prove it knows ``token`` (see :mod:`raydebug.protocol.handshake`)
        before anything goes to it: on a control connection ``process`` is then sent as
        the first message; a data socket (``connection``: the hub's number for it) is
        returned only then, for pydevd, with nothing read past the Welcome (those bytes are
        pydevd's). With a pinned certificate ``cert`` the connection is TLS, and a hub
        presenting another certificate is refused before anything is sent.
        Raises :class:`HubUnreachableError`, :class:`AuthenticationError` (the hub refused
        us, or :class:`HubAuthenticationError`: it could not prove itself) or
        :class:`ProtocolVersionError`.
        """
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
            shake = AgentHandshake(token, role, channel=connection, hub=f"the hub at {address}")
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


def _nodelay(sock: socket.socket) -> socket.socket:
    if sock.family in (socket.AF_INET, socket.AF_INET6):  # (a test's dialer: a socketpair)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return sock


def _read_greeting(sock: socket.socket, shake: AgentHandshake, address: str,
                   tls: bool, linked: bool = False) -> Challenge | Refused:
    """The hub's first message. A hub started with --tls waits for a TLS handshake that a
    plaintext agent never starts, then closes: say so, rather than "connection closed".
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
