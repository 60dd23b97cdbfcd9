"""Every error raydebug raises on purpose, in one tree.

    RaydebugError                   base: the CLI prints its message in one red line
    ├── ProtocolError               a byte stream broke the rules of its protocol
    │   ├── LocalProtocolError      we were about to send something illegal (our bug)
    │   ├── RemoteProtocolError     the peer sent something illegal (its bug, or an attack)
    │   │   └── SnapshotFormatError a dict that is not a snapshot (also ValueError)
    │   └── ProtocolVersionError    the peer speaks another version of the link protocol
    ├── AuthenticationError         a token was missing or wrong
    │   ├── HubAuthenticationError  the "hub" could not prove it knows the token (an impostor?)
    │   ├── ClientRefusedError      a client the hub does not serve (another user, a foreign Host)
    │   └── ClientTokenError        the hub's client token was not sent, or another was
    ├── HubUnreachableError         no hub answered at the address we were given
    ├── HubFullError                the hub holds as many sessions as it may (--max-sessions)
    ├── SessionNotFoundError        a session id that the hub does not know
    ├── SessionBusyError            a session that another client is already debugging
    ├── SelectorError               a process selector term that cannot be read (also ValueError)
    │   └── NoProcessMatchError     a selector that matches no process (``known``: what there is)
    ├── ChannelFailedError          a process could not serve a debugger channel (its reason)
    ├── DapRequestError             the debuggee (or the hub for it) refused a DAP request
    ├── UnknownIdError              a DAP id a group session's client sent maps to no process
    ├── SnapshotEvaluateError       what a snapshot cannot show: not a captured value's path
    ├── CommandError                a terminal debugger command that cannot be carried out
    ├── PeerClosed                  a client, or a process's channel, closed its connection
    ├── NotRewritableError          breakpoints of a file rewritten code cannot serve (3.10/3.11)
    ├── LinkError                   a running process could not be linked (`raydebug link`)
    │   ├── ProcessGoneError        it ended (or never was) while being linked
    │   ├── LinkPendingError        its GIL is held in C: a helper finishes the link later
    │   └── NotInSystemCallError    the thread stopped runs code or waits for the GIL: next
    └── ConfigurationError          a setting or environment variable that cannot work

The split between local and remote protocol errors follows h11: a remote error means "close
that connection and carry on serving everybody else", a local error means raydebug is wrong.
Messages carry what a user needs to act: the address tried, the variable to set, the ids known;
fields carry the same for a caller (``address``, ``command``, ``session_id``...).
:func:`hub_unreachable` is the one place a socket error becomes a :class:`HubUnreachableError`.
"""

from __future__ import annotations

from typing import Any


class RaydebugError(Exception):
    """Base class of every error raydebug raises deliberately."""


class ProtocolError(RaydebugError):
    """A stream of bytes or messages broke its protocol's rules."""


class LocalProtocolError(ProtocolError):
    """We were asked to send something the protocol forbids."""


class RemoteProtocolError(ProtocolError):
    """The peer sent something the protocol forbids; its connection should be closed."""


class SnapshotFormatError(RemoteProtocolError, ValueError):
    """A dict that is not a snapshot this version reads (an agent's ``SnapshotTaken``, a
    file of ``raydebug hub --snapshot-dir``); the message names the field."""


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



class ClientTokenError(AuthenticationError):
    """The hub asks for its client token (``--client-token``) and the request did not carry
    it: none was sent, or another one was. The message says which, and how to send it."""

class HubUnreachableError(RaydebugError):
    """No hub answered at the given address (``address``, when one was tried)."""

    def __init__(self, message: str, address: str | None = None) -> None:
        super().__init__(message)
        self.address = address


def hub_unreachable(address: str, error: BaseException,
                    saying: str = "cannot reach the hub at") -> HubUnreachableError:
    """The error for ``error``, a socket error met talking to the hub at ``address``:
    ``"<saying> <address> (<reason>)"``, the reason in the OS's words, lower case
    (``connection refused``), or the error's type when it has no words (a timeout).
    urllib's ``URLError`` is looked through to the socket error it wraps."""
    reason = getattr(error, "reason", error)  # urllib.error.URLError: the OSError inside
    text = getattr(reason, "strerror", None) or str(reason)
    words = text.lower() if text else type(reason).__name__
    return HubUnreachableError(f"{saying} {address} ({words})", address=address)


class HubFullError(RaydebugError):
    """The hub refused a new session: it holds ``max_sessions`` already. The process's other
    sessions stay served; ``session_id`` is the one refused."""

    def __init__(self, message: str, session_id: str, max_sessions: int) -> None:
        super().__init__(message)
        self.session_id = session_id
        self.max_sessions = max_sessions


class SessionNotFoundError(RaydebugError):
    """A session id that the hub does not know (anymore)."""


class SessionBusyError(RaydebugError):
    """The session already has a debugger attached."""


class SelectorError(RaydebugError, ValueError):
    """A process selector term (``KEY=VALUE``) that cannot be read; ``term`` is the term and
    the message names the known keys. A ValueError, so the hub's HTTP side answers 400."""

    def __init__(self, message: str, term: str = "") -> None:
        super().__init__(message)
        self.term = term

    @property
    def details(self) -> dict[str, Any]:
        """Extra fields of the HTTP error answer."""
        return {}


class NoProcessMatchError(SelectorError):
    """A selector that matches no live process; ``known`` lists, briefly, what there is."""

    def __init__(self, message: str, known: list[str]) -> None:
        super().__init__(message)
        self.known = known

    @property
    def details(self) -> dict[str, Any]:
        return {"known": self.known}


class ChannelFailedError(RaydebugError):
    """A process could not give a client a debugger channel; the message is its reason
    (as its agent reported it), and the session stays attachable."""


class DapRequestError(RaydebugError):
    """A DAP request was answered with ``success: false``. ``command`` is the request's,
    ``message`` the answer's reason (the error's text: ``"<command> failed"`` when it gave
    none), ``body`` the answer's body (DAP's ``ErrorResponse``: ``body.error`` may hold a
    structured message), ``session_id`` the raydebug session, when the caller knows it."""

    def __init__(self, command: str, message: str | None = None,
                 body: dict[str, Any] | None = None, session_id: str | None = None) -> None:
        super().__init__(message or f"{command} failed")
        self.command = command
        self.message = message or f"{command} failed"
        self.body = body or {}
        self.session_id = session_id


class UnknownIdError(RaydebugError):
    """A group session's client sent an id (``kind``: ``threadId``, ``frameId``,
    ``variablesReference``, ``sourceReference``) that maps to no process: never given, or
    dropped since (its thread ran on, its process left, or it was the oldest of too many).
    ``client_id`` is the id sent; the message says which of these it is. The group session
    answers the request with it, and carries on."""

    def __init__(self, kind: str, client_id: object, message: str) -> None:
        super().__init__(message)
        self.kind = kind
        self.client_id = client_id


class SnapshotEvaluateError(RaydebugError, ValueError):
    """An expression a snapshot cannot answer (``raydebug.snapshots.value_paths``): not a
    name or a path into the captured values, or a path to what the capture did not keep.
    The message says which, for the user; the snapshot session answers the evaluate with it."""


class CommandError(RaydebugError):
    """A terminal debugger command line that cannot be understood or carried out (a bad
    number, no such breakpoint, no frame); the message is shown as pdb shows errors, and the
    prompt comes back."""


class PeerClosed(RaydebugError):
    """The hub's peer (a DAP client, or in the relay a process's data channel) closed its
    connection. A normal end, not shown to anyone: whoever serves the connection stops."""


class NotRewritableError(RaydebugError):
    """The breakpoints of a file cannot be served by rewritten code (the message says why):
    the armed breakpoints trace that file instead (``raydebug.agent.armed.code``)."""


class LinkError(RaydebugError):
    """A running process could not be linked; the message is the one line to print, naming
    its pid and what to do."""


class ProcessGoneError(LinkError):
    """The process to link ended (or never was)."""


class LinkPendingError(LinkError):
    """The call into the process waits for its GIL, held by a thread in C; it cannot be
    taken back, so a helper process sees it through (``helper``: its pid)."""

    def __init__(self, message: str, helper: int) -> None:
        super().__init__(message)
        self.helper = helper


class NotInSystemCallError(LinkError):
    """The thread ptrace stopped was running code, or waiting for the GIL: calling into
    Python there is not safe (the next thread is tried)."""


class ConfigurationError(RaydebugError):
    """A setting or an environment variable has a value raydebug cannot use."""
