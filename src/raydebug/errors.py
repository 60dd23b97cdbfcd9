"""Every error raydebug raises on purpose, in one tree.

    RaydebugError                   base: the CLI prints its message in one red line
    ├── ProtocolError               a byte stream broke the rules of its protocol
    │   ├── LocalProtocolError      we were about to send something illegal (our bug)
    │   └── RemoteProtocolError     the peer sent something illegal (its bug, or an attack)
    ├── AuthenticationError         a token was missing or wrong
    ├── HubUnreachableError         no hub answered at the address we were given
    ├── SessionNotFoundError        a session id that the hub does not know
    ├── SessionBusyError            a session that another client is already debugging
    ├── ChannelFailedError          a process could not serve a debugger channel (its reason)
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


class AuthenticationError(RaydebugError):
    """A worker or client presented no token, or the wrong one."""


class HubUnreachableError(RaydebugError):
    """No hub answered at the given address."""


class SessionNotFoundError(RaydebugError):
    """A session id that the hub does not know (anymore)."""


class SessionBusyError(RaydebugError):
    """The session already has a debugger attached."""


class ChannelFailedError(RaydebugError):
    """A process could not give a client a debugger channel; the message is its reason
    (as its agent reported it), and the session stays attachable."""


class ConfigurationError(RaydebugError):
    """A setting or an environment variable has a value raydebug cannot use."""
