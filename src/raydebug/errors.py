"""Every error raydebug raises on purpose, in one tree.

    RaydebugError                   base: the CLI prints its message in one red line
    ├── ProtocolError               a byte stream broke the rules of its protocol
    │   ├── LocalProtocolError      we were about to send something illegal (our bug)
    │   ├── RemoteProtocolError     the peer sent something illegal (its bug, or an attack)
    │   └── ProtocolVersionError    the peer speaks another version of the worker protocol
    ├── AuthenticationError         a token was missing or wrong
    │   ├── HubAuthenticationError  the "hub" could not prove it knows the token (an impostor?)
    │   └── ClientRefusedError      a client the hub does not serve (another user, a foreign Host)
    ├── HubUnreachableError         no hub answered at the address we were given
    ├── SessionNotFoundError        a session id that the hub does not know
    ├── SessionBusyError            a session that another client is already debugging
    ├── ChannelFailedError          a process could not serve a debugger channel (its reason)
    ├── PeerClosed                  a client, or a process's channel, closed its connection
    └── ConfigurationError          a setting or environment variable that cannot work

The split between local and remote protocol errors follows h11: a remote error means "close
that connection and carry on serving everybody else", a local error means raydebug is wrong.
Messages carry what a user needs to act: the address tried, the variable to set, the ids known.
"""

from __future__ import annotations


class RaydebugError(Exception):
    """Base class of every error raydebug raises deliberately."""


class ProtocolError(RaydebugError):
    """A stream of bytes or messages broke its protocol's rules."""


class LocalProtocolError(ProtocolError):
    """We were asked to send something the protocol forbids."""


class RemoteProtocolError(ProtocolError):
    """The peer sent something the protocol forbids; its connection should be closed."""


class ProtocolVersionError(ProtocolError):
    """The two ends of a worker connection speak different protocol versions.

    ``ours`` and ``theirs`` are the versions; the message names both, and what to do.
    """

    def __init__(self, message: str, ours: int, theirs: int) -> None:
        super().__init__(message)
        self.ours = ours
        self.theirs = theirs


class AuthenticationError(RaydebugError):
    """A worker or client presented no token, or the wrong one."""


class HubAuthenticationError(AuthenticationError):
    """Whoever answered on the hub's address did not prove it knows the token: the agent
    gives it nothing (no session, no socket for pydevd). ``address`` is where it answered."""

    def __init__(self, message: str, address: str) -> None:
        super().__init__(message)
        self.address = address


class ClientRefusedError(AuthenticationError):
    """The hub does not serve this client: its socket belongs to another local user
    (``uid``), its owner cannot be told and no client token is set, or its HTTP ``Host``
    does not name the hub. ``status`` is the HTTP status that says so."""

    def __init__(self, message: str, status: int = 403, uid: int | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.uid = uid


class HubUnreachableError(RaydebugError):
    """No hub answered at the given address."""


class SessionNotFoundError(RaydebugError):
    """A session id that the hub does not know (anymore)."""


class SessionBusyError(RaydebugError):
    """The session already has a debugger attached."""


class ChannelFailedError(RaydebugError):
    """A process could not give a client a debugger channel; the message is its reason
    (as its agent reported it), and the session stays attachable."""


class PeerClosed(RaydebugError):
    """The hub's peer (a DAP client, or in the relay a process's data channel) closed its
    connection. A normal end, not shown to anyone: whoever serves the connection stops."""


class ConfigurationError(RaydebugError):
    """A setting or an environment variable has a value raydebug cannot use."""
