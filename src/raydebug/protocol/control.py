"""The link's control messages: how an agent inside a process talks to the hub.

Theory of operation. An agent dials *out* to the hub; nothing listens in the process beyond
loopback. Every connection of the link opens with the mutual handshake of
:mod:`raydebug.protocol.handshake` (``Challenge``, ``Hello``, then ``Welcome`` or
``Refused``): the token never crosses the wire, and the agent sends nothing about itself,
and hands nothing to the hub, before the hub has proven that it knows the token. (A hub over
its per-address connection limit sends ``Refused(reason)`` in place of the challenge. With
``raydebug hub --tls`` all of this runs inside TLS: see :mod:`raydebug.tls`.)

The *control connection* (one per process) then carries session bookkeeping both ways::

    agent -> hub     Identify(process)          who is calling: the first message, once
    agent -> hub     SessionStarted(session)    a thread paused: breakpoint() or exception
    agent -> hub     SessionEnded(session_id, reason)   why: see END_REASONS
    hub   -> agent   OpenDataConnection(channel)       a client wants to debug this process
    hub   -> agent   ClientReady(channel)       its configurationDone has been answered
    hub   -> agent   ClientGone(channel)        that client has left
    hub   -> agent   HubClosing(reason)         the hub goes away for good: every pause goes on
    agent -> hub     DataConnectionFailed(channel, reason)
    hub   -> agent   Refused(reason)            a session it cannot take (--max-sessions)
    hub   -> agent   ArmBreakpoints(breakpoints)   the cluster's breakpoint set (replaces it)
    agent -> hub     BreakpointsLoaded(paths)   code of these client paths is loaded here
    agent -> hub     LogpointOutput(text, path, line, task)   a logpoint's text (no pause)
    agent -> hub     SnapshotTaken(snapshot)    frames and locals captured (no pause)

A *live* process (``RAYDEBUG_LIVE``: linked from its start, see docs/design.md#live-link)
also says, after Identify on every (re)connect, what the hub lists about it, and answers
the hub's questions on the same connection::

    agent -> hub     Register(process)          pid, host, argv, labels, parent, Ray ids
    hub   -> agent   CollectStacks(request_id, locals)   every Python thread's stack, now
    agent -> hub     Stacks(request_id, threads, now)    ``now``: what it runs (task_name)
    hub   -> agent   Pause(request_id, expire_ms, by_client)   suspend every Python thread
    agent -> hub     Paused(request_id, error)  asked (sessions: as threads stop), or why not
    hub   -> agent   CancelPause(request_id)    withdraw every pause asked and not met
    agent -> hub     PauseCancelled(request_id, threads)   how many were withdrawn
    agent -> hub     PausePending(threads, since_ms)   threads asked that have not stopped
    hub   -> agent   Resume(request_id)         every paused thread runs on (raydebug continue)
    agent -> hub     Resumed(request_id, sessions, error)   the sessions that ended so

A *data connection* (``Hello.role == "data"``, one per attached client) is answered with
``Welcome``; the agent then hands the socket itself to the debugger, so it carries DAP between
the hub and pydevd with no relay in between (but over TLS, where one relay thread owns the SSL
object), and pydevd listens on no port at all.

Messages are JSON objects framed like DAP (Content-Length), with a ``type`` field. Fields a
version does not know are ignored, so that the ``version`` of a peer that speaks another one
can still be read, and the refusal can name both versions.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field, fields
from typing import Any, ClassVar

from ..errors import LocalProtocolError, RemoteProtocolError
from .framing import NEED_DATA, Framer, NeedData, frame

# 2: the hub proves the token too (Hello.nonce, Welcome.proof); Identify after its proof.
# 3: live processes (Register, CollectStacks/Stacks, Pause/Paused). 4: a pause request's end
# (Pause.expire_ms, CancelPause/PauseCancelled, PausePending). An older peer would drop the
# connection at its first new message, so the handshake refuses it up front.
# 5: open_data_connection and data_connection_failed (were open_channel, channel_failed).
# 6: Resume/Resumed (raydebug continue). 7: SnapshotTaken (snapshots kept by the hub).
PROTOCOL_VERSION = 7
MAX_CONTROL_MESSAGE = 1024 * 1024

ROLE_CONTROL = "control"
ROLE_DATA = "data"


@dataclass(frozen=True)
class ControlMessage:
    """Base of control messages; ``TYPE`` is the wire name."""

    TYPE: ClassVar[str] = ""

    def to_dict(self) -> dict[str, Any]:
        """The message as its JSON object: its ``type``, then each field."""
        return {"type": self.TYPE, **asdict(self)}


@dataclass(frozen=True)
class Challenge(ControlMessage):
    """Hub -> agent, first on every connection: prove you know the token over ``nonce``."""

    TYPE: ClassVar[str] = "challenge"
    nonce: str
    version: int = PROTOCOL_VERSION


@dataclass(frozen=True)
class Hello(ControlMessage):
    """Agent -> hub: the answer to :class:`Challenge`, ``mac`` its proof of the token."""

    TYPE: ClassVar[str] = "hello"
    role: str
    mac: str
    version: int = PROTOCOL_VERSION
    nonce: str = ""  # the agent's challenge to the hub (absent before version 2)
    channel: int = 0  # data: which OpenDataConnection this answers


@dataclass(frozen=True)
class Welcome(ControlMessage):
    """Hub -> agent: the agent is proven; ``proof`` proves the hub over both nonces."""

    TYPE: ClassVar[str] = "welcome"
    proof: str = ""  # the hub's answer to Hello.nonce (absent before version 2)


@dataclass(frozen=True)
class Identify(ControlMessage):
    """The first message on a control connection: what the process says about itself."""

    TYPE: ClassVar[str] = "identify"
    process: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Refused(ControlMessage):
    """Hub -> agent: why the hub does not take this connection, or this session."""

    TYPE: ClassVar[str] = "refused"
    reason: str


@dataclass(frozen=True)
class SessionStarted(ControlMessage):
    """Agent -> hub: a thread paused; ``session`` is its record."""

    TYPE: ClassVar[str] = "session_started"
    session: dict[str, Any]


END_RETURNED = "returned"  # the function it paused in returned (or its thread ended)
END_MOVED = "moved"  # the same thread paused somewhere else: a new session took over
END_RESUMED = "resumed"  # it ran on with no client attached
END_TIMEOUT = "timeout"  # no client attached within RAYDEBUG_WAIT_TIMEOUT
END_RAISED = "raised"  # post-mortem: resumed, the exception went on
END_REASONS = (END_RETURNED, END_MOVED, END_RESUMED, END_TIMEOUT, END_RAISED)


@dataclass(frozen=True)
class SessionEnded(ControlMessage):
    """Agent -> hub: a session is over, and why (one of :data:`END_REASONS`)."""

    TYPE: ClassVar[str] = "session_ended"
    session_id: str
    reason: str = END_RESUMED
    returned: str = ""  # with END_RETURNED after a step: repr() of the return value, if seen


@dataclass(frozen=True)
class OpenDataConnection(ControlMessage):
    """Hub -> agent: a client wants this process: dial a data connection for ``channel``."""

    TYPE: ClassVar[str] = "open_data_connection"
    channel: int


@dataclass(frozen=True)
class ClientReady(ControlMessage):
    """Hub -> agent: the client of ``channel`` has had its ``configurationDone`` answered."""

    TYPE: ClassVar[str] = "client_ready"
    channel: int


@dataclass(frozen=True)
class ClientGone(ControlMessage):
    """Hub -> agent: the client of ``channel`` has left."""

    TYPE: ClassVar[str] = "client_gone"
    channel: int


@dataclass(frozen=True)
class HubClosing(ControlMessage):
    """The hub is going away for good (the hub actor's node is stopping): every paused
    thread of the process runs on, or the node would wait for its lease."""

    TYPE: ClassVar[str] = "hub_closing"
    reason: str = ""


@dataclass(frozen=True)
class DataConnectionFailed(ControlMessage):
    """Agent -> hub: the data connection for ``channel`` could not be opened, and why."""

    TYPE: ClassVar[str] = "data_connection_failed"
    channel: int
    reason: str


@dataclass(frozen=True)
class ArmBreakpoints(ControlMessage):
    """The cluster's breakpoints (``raydebug.agent.armed.breakpoints.BreakpointSet`` wire
    form: ``sources``, ``functions``, ``exceptions``); an empty one disarms."""

    TYPE: ClassVar[str] = "arm_breakpoints"
    breakpoints: dict[str, Any]


@dataclass(frozen=True)
class BreakpointsLoaded(ControlMessage):
    """Agent -> hub: code of these client paths is loaded in this process."""

    TYPE: ClassVar[str] = "breakpoints_loaded"
    paths: list[str]  # the client's paths, as ArmBreakpoints named them


@dataclass(frozen=True)
class LogpointOutput(ControlMessage):
    """Agent -> hub: a logpoint's text, logged without a pause."""

    TYPE: ClassVar[str] = "logpoint_output"
    text: str
    path: str = ""  # the file as the process sees it
    line: int = 0
    task: str = ""  # what the process ran at that moment (a Ray task's name), if known


@dataclass(frozen=True)
class SnapshotTaken(ControlMessage):
    """Agent -> hub: a failure's or a snapshot point's capture, kept by the hub after the
    process is gone (``raydebug.snapshots.format.Snapshot`` wire form, read by the hub)."""

    TYPE: ClassVar[str] = "snapshot_taken"
    snapshot: dict[str, Any]


@dataclass(frozen=True)
class Register(ControlMessage):
    """A live process's record, sent after Identify on every (re)connect: the fields of a
    process the hub lists (``pid``, ``host``, ``argv``, ``labels``, ``since``,
    ``parent_pid``, Ray's ``job_id``, ``node_id``, ``node_ip``, ``worker_id``,
    ``actor_class``...), without those the hub assigns (``id``, ``state``, ``sessions``)."""

    TYPE: ClassVar[str] = "register"
    process: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class CollectStacks(ControlMessage):
    """Hub -> agent: send every Python thread's stack (with bounded locals, if asked)."""

    TYPE: ClassVar[str] = "collect_stacks"
    request_id: int
    locals: bool = False
    frames: bool = True  # False: only what it runs now (``Stacks.now``), for a listing


@dataclass(frozen=True)
class Stacks(ControlMessage):
    """Agent -> hub: the answer to :class:`CollectStacks`. ``threads`` in the shape of
    ``GET /api/stacks`` (frames outermost first); ``now``: what the process runs at this
    moment (``task_name``), read as it answered."""

    TYPE: ClassVar[str] = "stacks"
    request_id: int
    threads: list[Any] = field(default_factory=list)
    now: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Pause(ControlMessage):
    """Hub -> agent: suspend every Python thread, each a session with reason ``pause``;
    a thread that has not stopped within ``expire_ms`` is no longer asked (0: until it
    stops or a ``CancelPause``). ``by_client``: the DAP ``pause`` of the client attached to
    this process (the hub answered it), which asks every thread not suspended now, those of
    sessions it let run on too; no ``Paused`` is awaited."""

    TYPE: ClassVar[str] = "pause"
    request_id: int
    expire_ms: int = 0
    by_client: bool = False


@dataclass(frozen=True)
class Paused(ControlMessage):
    """Agent -> hub: every thread was asked to suspend (each sends ``SessionStarted`` once it
    has stopped), or ``error``."""

    TYPE: ClassVar[str] = "paused"
    request_id: int
    error: str = ""


@dataclass(frozen=True)
class CancelPause(ControlMessage):
    """Hub -> agent: withdraw every pause asked that no thread has met yet (``raydebug
    pause --cancel``); such a thread runs on when it returns to Python."""

    TYPE: ClassVar[str] = "cancel_pause"
    request_id: int


@dataclass(frozen=True)
class PauseCancelled(ControlMessage):
    """Agent -> hub: the answer to :class:`CancelPause`: how many threads' pauses were
    withdrawn."""

    TYPE: ClassVar[str] = "pause_cancelled"
    request_id: int
    threads: int = 0


@dataclass(frozen=True)
class PausePending(ControlMessage):
    """Agent -> hub, whenever it changes: how many threads are asked to pause and have not
    stopped (0: none), and since when the oldest of them was asked (ms since the epoch)."""

    TYPE: ClassVar[str] = "pause_pending"
    threads: int = 0
    since_ms: int = 0


@dataclass(frozen=True)
class Resume(ControlMessage):
    """Hub -> agent (``raydebug continue``): every paused thread of the process runs on, as
    a client's ``continue`` of all would let it; asked only of a process no client is
    attached to (a client's stops are the client's to resume)."""

    TYPE: ClassVar[str] = "resume"
    request_id: int


@dataclass(frozen=True)
class Resumed(ControlMessage):
    """Agent -> hub: the answer to :class:`Resume`: the ids of the sessions it ended so
    (each one's ``SessionEnded`` was sent before this), or why none (``error``)."""

    TYPE: ClassVar[str] = "resumed"
    request_id: int
    sessions: list[str] = field(default_factory=list)
    error: str = ""


_MESSAGE_TYPES: dict[str, type[ControlMessage]] = {
    cls.TYPE: cls
    for cls in (Challenge, Hello, Welcome, Identify, Refused, SessionStarted, SessionEnded,
                OpenDataConnection, ClientReady, ClientGone, DataConnectionFailed, HubClosing,
                ArmBreakpoints, BreakpointsLoaded, LogpointOutput, SnapshotTaken, Register,
                CollectStacks, Stacks, Pause, Paused, CancelPause, PauseCancelled,
                PausePending, Resume, Resumed)
}
# A field's annotation -> the JSON type its value must have.
_JSON_TYPES = {"str": str, "int": int, "bool": bool, "dict[str, Any]": dict,
               "list[Any]": list, "list[str]": list}


def _field_types(cls: type[ControlMessage]) -> tuple[tuple[str, type[Any], bool], ...]:
    """Each field of ``cls``: its name, its JSON type, and whether it holds only strings."""
    return tuple((spec.name, _JSON_TYPES[str(spec.type)], str(spec.type) == "list[str]")
                 for spec in fields(cls))


# Worked out once, at import: a hub decodes 10,000 answers to one listing's question.
_FIELD_TYPES = {cls: _field_types(cls) for cls in _MESSAGE_TYPES.values()}


def decode_control(body: bytes) -> ControlMessage:
    """Parse one control message body; raises :class:`RemoteProtocolError`."""
    try:
        data = json.loads(body)
    except (UnicodeDecodeError, ValueError) as error:
        raise RemoteProtocolError(f"control message is not valid JSON: {error}") from error
    if not isinstance(data, dict):
        raise RemoteProtocolError("control message is not a JSON object")
    kind = data.get("type")
    cls = _MESSAGE_TYPES.get(kind) if isinstance(kind, str) else None
    if cls is None:
        raise RemoteProtocolError(f"unknown control message type {data.get('type')!r}")
    kwargs = {}
    for name, expected, strings_only in _FIELD_TYPES[cls]:
        if name not in data:
            continue  # a missing field with no default fails in the constructor below
        value = data[name]
        if not isinstance(value, expected) or (expected is int and isinstance(value, bool)):
            raise RemoteProtocolError(f"{cls.TYPE}.{name} must be a {expected.__name__}")
        if strings_only and not all(isinstance(item, str) for item in value):
            raise RemoteProtocolError(f"{cls.TYPE}.{name} must be a list of strings")
        kwargs[name] = value
    try:
        return cls(**kwargs)
    except TypeError as error:
        raise RemoteProtocolError(f"incomplete {cls.TYPE} message: {error}") from error


def encode_control(message: ControlMessage) -> bytes:
    """Return the framed bytes of ``message``; raises :class:`LocalProtocolError` when it
    cannot be encoded or is over :data:`MAX_CONTROL_MESSAGE`."""
    try:
        body = json.dumps(message.to_dict(), separators=(",", ":")).encode()
    except (TypeError, ValueError) as error:
        raise LocalProtocolError(f"cannot encode {message.TYPE}: {error}") from error
    return frame(body, MAX_CONTROL_MESSAGE)


class ControlConnection:
    """One side of a control connection, sans-IO, with the verbs of :class:`DapConnection`."""

    def __init__(self) -> None:
        self._framer = Framer(max_body_size=MAX_CONTROL_MESSAGE)

    def receive_data(self, data: bytes) -> None:
        """Feed bytes received from the peer; ``b""`` when it closed its side."""
        self._framer.receive_data(data)

    def next_event(self) -> ControlMessage | NeedData:
        """The peer's next whole message, or :data:`NEED_DATA`. Raises
        :class:`RemoteProtocolError` for a malformed, oversized or unknown message, or an
        end of stream in the middle of one: the connection is then unusable."""
        body = self._framer.next_body()
        if body is NEED_DATA:
            return NEED_DATA
        assert isinstance(body, bytes)
        return decode_control(body)

    def send(self, message: ControlMessage) -> bytes:
        """The bytes of ``message``; raises :class:`LocalProtocolError` when it cannot be
        encoded or is over :data:`MAX_CONTROL_MESSAGE`."""
        return encode_control(message)

    def take_buffered(self) -> bytes:
        """Hand over the bytes past the last message (a data connection's first DAP bytes)."""
        return self._framer.take_buffered()

    @property
    def at_eof(self) -> bool:
        """True once the peer closed its side."""
        return self._framer.at_eof
