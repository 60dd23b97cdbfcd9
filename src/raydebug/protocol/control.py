"""The worker channel: how an agent inside a paused process talks to the hub.

Theory of operation. A worker dials *out* to the hub's worker listener; nothing listens on
the worker's side beyond loopback. Every connection opens with a mutual challenge-response
(:mod:`raydebug.protocol.handshake`), so the token never crosses the wire and each side
proves to the other that it knows it::

    hub   -> agent   Challenge(nonce=H)
    agent -> hub     Hello(role, channel, nonce=A, mac=proof of the agent over H and A)
    hub   -> agent   Welcome(proof of the hub over H and A)  or  Refused(reason), then close

The agent sends nothing about itself, and hands nothing to the hub, before it has checked
the Welcome's proof: whoever answers on the hub's address without the token learns nothing
and gets nothing. (A hub over its per-address connection limit sends ``Refused(reason)`` in
place of the challenge. With ``raydebug hub --tls`` all of this runs inside TLS: see
:mod:`raydebug.tls`.)

A *control* connection (one per process) then carries session bookkeeping both ways::

    agent -> hub     Identify(process)          who is calling: the first message, once
    agent -> hub     SessionStarted(session)    a thread paused: breakpoint() or exception
    agent -> hub     SessionEnded(session_id, reason)   why: see END_REASONS
    hub   -> agent   OpenChannel(channel)       a client wants to debug this process
    hub   -> agent   ClientReady(channel)       its configurationDone has been answered
    hub   -> agent   ClientGone(channel)        that client has left
    hub   -> agent   HubClosing(reason)         the hub goes away for good: every pause goes on
    agent -> hub     ChannelFailed(channel, reason)
    hub   -> agent   Refused(reason)            a session it cannot take (--max-sessions)
    hub   -> agent   ArmBreakpoints(breakpoints)   the cluster's breakpoint set (replaces it)
    agent -> hub     BreakpointsLoaded(paths)   code of these client paths is loaded here
    agent -> hub     LogpointOutput(text, path, line, task)   a logpoint's text (no pause)

A *live* process (``RAYDEBUG_LIVE``: linked from its start, see docs/design.md#live-link)
also says, after Identify on every (re)connect, what the hub lists about it, and answers
the hub's questions on the same connection::

    agent -> hub     Register(process)          pid, host, argv, labels, parent, Ray ids
    hub   -> agent   CollectStacks(request_id, locals)   every Python thread's stack, now
    agent -> hub     Stacks(request_id, threads, now)    ``now``: what it runs (task_name)
    hub   -> agent   Pause(request_id, expire_ms, by_client)   suspend every Python thread:
                                                sessions follow; asks not met in expire_ms are
                                                withdrawn (by_client: an attached client's
                                                DAP pause, request_id 0, not answered)
    agent -> hub     Paused(request_id, error)  asked (sessions: as threads stop), or why not
    hub   -> agent   CancelPause(request_id)    withdraw every pause asked and not met
    agent -> hub     PauseCancelled(request_id, threads)   how many were withdrawn
    agent -> hub     PausePending(threads, since_ms)   threads asked that have not stopped
                                                (0: none), the oldest asked since (epoch ms)

A *data* connection (``Hello.role == "data"``, one per attached client) is answered with
``Welcome``; the agent then hands the socket itself to pydevd, so it carries DAP between the
hub and pydevd with no relay in between (and pydevd listens on no port at all).

Messages are JSON objects framed like DAP (Content-Length), with a ``type`` field. Fields a
version does not know are ignored, so that the ``version`` of a peer that speaks another one
can still be read, and the refusal can name both versions.
"""

from __future__ import annotations

import dataclasses
import json
import os
import threading
from dataclasses import asdict, field, fields
from typing import TYPE_CHECKING, Any, ClassVar

from ..errors import LocalProtocolError, RemoteProtocolError
from .framing import NEED_DATA, Framer, NeedData, frame

if TYPE_CHECKING:
    from dataclasses import dataclass
else:
    def dataclass(**options: Any) -> Any:
        """``dataclasses.dataclass``, applied to a message type just before its first
        instance (see :meth:`ControlMessage.__init__`): making a frozen dataclass compiles
        six methods (~0.7 ms a type on 3.11), and done for all 21 at import it was most of
        the agent's import on a process's first ``breakpoint()`` (docs/design.md#agent-import).
        Before its first instance a type's own fields are not there (``fields()`` shows its
        base's): nothing reads them then, and :func:`decode_control` makes it first."""

        def later(cls: type) -> type:
            _NOT_YET_DATACLASSES[cls] = options
            return cls

        return later


_NOT_YET_DATACLASSES: dict[type, dict[str, Any]] = {}  # message type -> its dataclass options
# A lock, no thread: an agent's paused threads and its link thread make messages, and a
# type is not whole until dataclass() has returned. A fork waits for it: its child gets
# whole types and a free lock.
_making_dataclasses = threading.Lock()
os.register_at_fork(before=_making_dataclasses.acquire,
                    after_in_parent=_making_dataclasses.release,
                    after_in_child=_making_dataclasses.release)


def _make_dataclass(cls: type) -> None:
    """Make ``cls`` and its bases the dataclasses they are written as, once; thread-safe."""
    with _making_dataclasses:
        for klass in reversed(cls.__mro__):
            options = _NOT_YET_DATACLASSES.pop(klass, None)
            if options is not None:
                dataclasses.dataclass(**options)(klass)

# 2: the hub proves the token too (Hello.nonce, Welcome.proof), and Identify carries the
# process's description once the hub is proven (it was in Hello).
# 3: live processes (Register, CollectStacks/Stacks, Pause/Paused): a version-2 agent would
# drop its connection at the first CollectStacks, so the handshake refuses it up front.
# 4: a pause request's end (Pause.expire_ms, CancelPause/PauseCancelled, PausePending): a
# version-3 hub would drop a connection at its first PausePending.
PROTOCOL_VERSION = 4
MAX_CONTROL_MESSAGE = 1024 * 1024

ROLE_CONTROL = "control"
ROLE_DATA = "data"


@dataclass(frozen=True)
class ControlMessage:
    """Base of worker-channel messages; ``TYPE`` is the wire name."""

    TYPE: ClassVar[str] = ""

    if not TYPE_CHECKING:
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            """Runs once per message type: makes the type its dataclass (whose own
            ``__init__`` replaces this one), then initialises ``self`` with it."""
            cls = type(self)
            _make_dataclass(cls)
            if cls is not ControlMessage:  # (dataclass() keeps the __init__ a class defines)
                cls.__init__(self, *args, **kwargs)

    def to_dict(self) -> dict[str, Any]:
        return {"type": self.TYPE, **asdict(self)}


@dataclass(frozen=True)
class Challenge(ControlMessage):
    TYPE: ClassVar[str] = "challenge"
    nonce: str
    version: int = PROTOCOL_VERSION


@dataclass(frozen=True)
class Hello(ControlMessage):
    TYPE: ClassVar[str] = "hello"
    role: str
    mac: str
    version: int = PROTOCOL_VERSION
    nonce: str = ""  # the agent's challenge to the hub (absent before version 2)
    channel: int = 0  # data: which OpenChannel this answers


@dataclass(frozen=True)
class Welcome(ControlMessage):
    TYPE: ClassVar[str] = "welcome"
    proof: str = ""  # the hub's answer to Hello.nonce (absent before version 2)


@dataclass(frozen=True)
class Identify(ControlMessage):
    """The first message on a control connection: what the process says about itself."""

    TYPE: ClassVar[str] = "identify"
    process: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Refused(ControlMessage):
    TYPE: ClassVar[str] = "refused"
    reason: str


@dataclass(frozen=True)
class SessionStarted(ControlMessage):
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
    TYPE: ClassVar[str] = "session_ended"
    session_id: str
    reason: str = END_RESUMED
    returned: str = ""  # with END_RETURNED after a step: repr() of the return value, if seen


@dataclass(frozen=True)
class OpenChannel(ControlMessage):
    TYPE: ClassVar[str] = "open_channel"
    channel: int


@dataclass(frozen=True)
class ClientReady(ControlMessage):
    TYPE: ClassVar[str] = "client_ready"
    channel: int


@dataclass(frozen=True)
class ClientGone(ControlMessage):
    TYPE: ClassVar[str] = "client_gone"
    channel: int


@dataclass(frozen=True)
class HubClosing(ControlMessage):
    """The hub is going away for good (the hub actor's node is stopping): every paused
    thread of the process runs on, or the node would wait for its lease."""

    TYPE: ClassVar[str] = "hub_closing"
    reason: str = ""


@dataclass(frozen=True)
class ChannelFailed(ControlMessage):
    TYPE: ClassVar[str] = "channel_failed"
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
    TYPE: ClassVar[str] = "breakpoints_loaded"
    paths: list[str]  # the client's paths, as ArmBreakpoints named them


@dataclass(frozen=True)
class LogpointOutput(ControlMessage):
    TYPE: ClassVar[str] = "logpoint_output"
    text: str
    path: str = ""  # the file as the process sees it
    line: int = 0
    task: str = ""  # what the process ran at that moment (a Ray task's name), if known


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


_MESSAGE_TYPES: dict[str, type[ControlMessage]] = {
    cls.TYPE: cls
    for cls in (Challenge, Hello, Welcome, Identify, Refused, SessionStarted, SessionEnded,
                OpenChannel, ClientReady, ClientGone, ChannelFailed, Register, CollectStacks,
                Stacks, Pause, Paused, HubClosing)
}
_MESSAGE_TYPES.update({cls.TYPE: cls for cls in (ArmBreakpoints, BreakpointsLoaded,
                                                  LogpointOutput, CancelPause,
                                                  PauseCancelled, PausePending)})
_JSON_TYPES = {"str": str, "int": int, "bool": bool, "dict[str, Any]": dict,
               "list[Any]": list}
_JSON_TYPES["list[str]"] = list


def _fields_of(cls: type[ControlMessage]) -> tuple[tuple[tuple[str, type], ...], tuple[str, ...]]:
    """Each field of a message type with its JSON type, and its fields that hold lists of
    strings; worked out once per type (a hub decodes 10,000 answers to one listing's
    question), at its first decode."""
    known = _FIELDS.get(cls)
    if known is None:
        _make_dataclass(cls)
        specs = fields(cls)
        known = (tuple((spec.name, _JSON_TYPES[str(spec.type)]) for spec in specs),
                 tuple(spec.name for spec in specs if str(spec.type) == "list[str]"))
        _FIELDS[cls] = known
    return known


_FIELDS: dict[type[ControlMessage], tuple[tuple[tuple[str, type], ...], tuple[str, ...]]] = {}


def decode_control(body: bytes) -> ControlMessage:
    """Parse one worker-channel message; raises :class:`RemoteProtocolError`."""
    try:
        data = json.loads(body)
    except (UnicodeDecodeError, ValueError) as error:
        raise RemoteProtocolError(f"worker message is not valid JSON: {error}") from error
    if not isinstance(data, dict):
        raise RemoteProtocolError("worker message is not a JSON object")
    kind = data.get("type")
    cls = _MESSAGE_TYPES.get(kind) if isinstance(kind, str) else None
    if cls is None:
        raise RemoteProtocolError(f"unknown worker message type {data.get('type')!r}")
    kwargs = {}
    field_types, string_lists = _fields_of(cls)
    for name, kind in field_types:
        if name not in data:
            continue  # a missing field with no default fails in the constructor below
        value = data[name]
        if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
            raise RemoteProtocolError(f"{cls.TYPE}.{name} must be a {kind.__name__}")
        if isinstance(value, list) and name in string_lists and not all(
                isinstance(item, str) for item in value):
            raise RemoteProtocolError(f"{cls.TYPE}.{name} must be a list of strings")
        kwargs[name] = value
    try:
        return cls(**kwargs)
    except TypeError as error:
        raise RemoteProtocolError(f"incomplete {cls.TYPE} message: {error}") from error


def encode_control(message: ControlMessage) -> bytes:
    """Return the framed bytes of ``message``."""
    try:
        body = json.dumps(message.to_dict(), separators=(",", ":")).encode()
    except (TypeError, ValueError) as error:
        raise LocalProtocolError(f"cannot encode {message.TYPE}: {error}") from error
    return frame(body, MAX_CONTROL_MESSAGE)


class ControlStream:
    """Sans-IO reader of worker-channel messages (same three verbs as DapConnection)."""

    def __init__(self) -> None:
        self._framer = Framer(max_body_size=MAX_CONTROL_MESSAGE)

    def receive_data(self, data: bytes) -> None:
        self._framer.receive_data(data)

    def next_event(self) -> ControlMessage | NeedData:
        body = self._framer.next_body()
        if body is NEED_DATA:
            return NEED_DATA
        assert isinstance(body, bytes)
        return decode_control(body)

    def send(self, message: ControlMessage) -> bytes:
        return encode_control(message)

    def take_buffered(self) -> bytes:
        """Hand over bytes received past the last message (a data channel's first DAP bytes)."""
        return self._framer.take_buffered()

    @property
    def at_eof(self) -> bool:
        """True once the peer closed its side."""
        return self._framer.at_eof
