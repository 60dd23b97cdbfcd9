"""What the hub does with each message between a DAP client and a process's debugger.

Theory of operation. Once a client has attached, the hub relays one data connection: the
client on one side, the debugger (pydevd) on the other. Most messages pass unchanged;
:class:`ProxyPolicy` decides the rest, without sockets or asyncio (the relay in
``raydebug.hub.clients.relay`` does the I/O and carries out its decisions). Its rules:

- a request the hub sent pydevd itself (:meth:`ProxyPolicy.inject`, numbered from
  :data:`INJECTED_SEQ`) has its answer swallowed: the client never asked;
- requests from the debuggee side (reverse requests such as ``runInTerminal``) are refused,
  never passed to the client (security: the client may run them);
- ``terminate`` and ``disconnect{terminateDebuggee: true}`` never kill the process unless
  the hub allows it (``--allow-terminate``): the first is refused, the second rewritten;
- the answer to ``configurationDone`` is followed by :class:`TellAgentReady`, which releases
  the paused threads (pydevd then sends ``stopped``) or replays old stops;
- ``pause`` is answered by the hub and carried out by the agent (:class:`TellAgentPause`),
  as ``raydebug pause`` is: pydevd alone cannot stop a thread blocked in C, while the agent
  signals the main thread and serves a blocked one where it waits; the request it makes is
  withdrawn after :data:`CLIENT_PAUSE_WAIT` seconds if nothing has stopped. pydevd's own
  answer to ``pause`` says nothing more than success (DAP: the response first, then
  ``stopped`` as threads stop), and the hub gives that one answer;
- when the data connection closes (:meth:`ProxyPolicy.data_connection_closed`), every request
  pydevd had not answered gets its answer from the hub (see :mod:`.outstanding`) and the
  client gets ``terminated`` (once); requests sent after that are answered by the hub too.
  A request that only lets the process run on (:data:`RESUMING`) succeeds: the process did
  run on, then ended (it often ends before pydevd's answer leaves it); one whose result the
  client needs fails with :data:`PROCESS_ENDED`.

Decisions are lists of actions (:class:`ToClient`, :class:`ToDebugger`, :class:`TellAgentReady`,
:class:`TellAgentPause`, :class:`ThreadsResumed`), in the order they must happen. The fast
path stays fast: a body from pydevd is parsed only when it may concern the policy
(:func:`~.connection.mentions`); otherwise :meth:`ProxyPolicy.from_debugger` returns
:data:`PASS` and its bytes go on as they are.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Final

from .connection import mentions
from .messages import Event, Message, Request, Response, parse_message
from .outstanding import OutstandingRequests

INJECTED_SEQ = 1_000_000_000  # requests the hub sends pydevd itself count from here

# Only pydevd's messages containing one of these are parsed; the rest pass as bytes. (The
# client's are all parsed: few, and each request is noted until its answer.)
DEBUGGER_WORDS = (b'"request"', b'"configurationDone"', b'"terminated"')
PROCESS_ENDED = ("the debugged process has ended (it exited, was killed, or its data connection "
                 "closed)")
# Requests that ask only that the process run on (or that it be left): one the process could
# not answer was carried out all the same, since it ran on until it ended.
RESUMING = frozenset({"continue", "next", "stepIn", "stepOut", "disconnect"})
REFUSED = "refused by the raydebug hub"
# Seconds a client's pause stays asked of a thread that has not stopped (nor been served
# blocked in C): then it is withdrawn, as ``raydebug pause --wait`` withdraws its own.
CLIENT_PAUSE_WAIT = 10.0

# pydevd's own answer to initialize (debugpy 1.8, in-process adapter), so that clients see
# the same debugger through the hub as they would directly.
PYDEVD_CAPABILITIES: dict[str, Any] = {
    "supportsConfigurationDoneRequest": True,
    "supportsConditionalBreakpoints": True,
    "supportsHitConditionalBreakpoints": True,
    "supportsEvaluateForHovers": True,
    "supportsSetVariable": True,
    "supportsGotoTargetsRequest": True,
    "supportsCompletionsRequest": True,
    "supportsModulesRequest": True,
    "supportsExceptionOptions": True,
    "supportsValueFormattingOptions": True,
    "supportsExceptionInfoRequest": True,
    "supportsDelayedStackTraceLoading": True,
    "supportsLogPoints": True,
    "supportsSetExpression": True,
    "supportsClipboardContext": True,
    "supportsFunctionBreakpoints": True,
    "supportsStepInTargetsRequest": True,
    "exceptionBreakpointFilters": [
        {"filter": "raised", "label": "Raised Exceptions", "default": False},
        {"filter": "uncaught", "label": "Uncaught Exceptions", "default": True},
        {"filter": "userUnhandled", "label": "User Uncaught Exceptions", "default": False},
    ],
}


def adapter_capabilities(allow_terminate: bool) -> dict[str, Any]:
    """The hub's answer to ``initialize``, given before it knows which process the client
    wants: pydevd's, with terminating offered only when the hub allows it."""
    capabilities = dict(PYDEVD_CAPABILITIES)
    capabilities["supportTerminateDebuggee"] = allow_terminate
    capabilities["supportsTerminateRequest"] = allow_terminate
    return capabilities


def success(request: Request, body: dict[str, Any] | None = None) -> Response:
    """The hub's own successful answer to ``request`` (its ``seq`` is set when sent)."""
    return Response(seq=0, request_seq=request.seq, command=request.command, body=body or {})


def failure(request: Request, text: str) -> Response:
    """The hub's own error answer to ``request``, shown to the user (DAP ``ErrorResponse``)."""
    return Response(seq=0, request_seq=request.seq, command=request.command, success=False,
                    message=text, body={"error": {"id": 1, "format": text, "showUser": True}})


@dataclass(frozen=True)
class ToClient:
    """Send ``message`` to the client. ``forwarded``: pydevd's own message, which keeps its
    ``seq`` and bytes; otherwise the hub made it and numbers it."""

    message: Message
    forwarded: bool = False


@dataclass(frozen=True)
class ToDebugger:
    """Send ``message`` to pydevd as it is (its ``seq`` included)."""

    message: Message


@dataclass(frozen=True)
class TellAgentReady:
    """The client's configuration is done: tell the agent (``ClientReady``), which releases
    the paused threads."""


@dataclass(frozen=True)
class TellAgentPause:
    """The client asked to ``pause``: tell the agent (``Pause``, ``by_client``), which asks
    every thread not suspended to stop, signals a main thread blocked in C and serves any
    thread still blocked where it waits; what has not stopped within ``expire_ms`` is no
    longer asked."""

    expire_ms: int


@dataclass(frozen=True)
class ThreadsResumed:
    """The client's ``disconnect`` goes to pydevd, which resumes every thread: the process's
    sessions as of now end with the client (not a moment later, when the agent says so)."""


Action = ToClient | ToDebugger | TellAgentReady | TellAgentPause | ThreadsResumed


class _Pass:
    def __repr__(self) -> str:
        return "PASS"


PASS: Final = _Pass()  # from_debugger: forward the body unchanged


class ProxyPolicy:
    """The rules of one relayed data connection, from the client's ``attach`` to its end.

    One per data connection: a failed set-up takes its policy with it.
    """

    def __init__(self, allow_terminate: bool) -> None:
        self._allow_terminate = allow_terminate
        self._injected: set[int] = set()  # seqs of requests the hub sent pydevd itself
        self._next_injected = INJECTED_SEQ
        self._configuration_done_seq: int | None = None
        self._outstanding = OutstandingRequests()
        self._terminated_sent = False
        self.ended = False  # the data connection has closed: the hub answers

    # -- client -> pydevd -------------------------------------------------------------------

    def from_client(self, message: Message, *, data_connection_open: bool = True) -> list[Action]:
        """What to do with a message from the client. ``data_connection_open`` False: pydevd can
        no longer be reached (its data connection is closing), so the hub answers."""
        if self.ended or not data_connection_open:
            return self.answer_after_end(message)
        if not isinstance(message, Request):
            return [ToDebugger(message)]
        if not self._allow_terminate:
            if message.command == "terminate":
                return [ToClient(failure(message, "this hub does not terminate debuggees "
                                                  "(start it with --allow-terminate); "
                                                  "disconnect to let the process run on"))]
            if message.command == "disconnect" and message.arguments.get("terminateDebuggee"):
                arguments = {**message.arguments, "terminateDebuggee": False}
                message = replace(message, arguments=arguments, raw=None)
        if message.command == "pause":
            # One answer, the hub's, then the agent pauses: pydevd never sees this request.
            return [ToClient(success(message)),
                    TellAgentPause(expire_ms=round(CLIENT_PAUSE_WAIT * 1000))]
        actions: list[Action] = []
        if message.command == "configurationDone":
            self._configuration_done_seq = message.seq
        elif message.command == "disconnect":
            actions.append(ThreadsResumed())
        self._outstanding.forwarded(message)
        actions.append(ToDebugger(message))
        return actions

    def inject(self, requests: list[Request]) -> list[ToDebugger]:
        """Requests the hub sends pydevd itself (the breakpoint set's), renumbered
        so that their answers are recognised and swallowed."""
        actions = []
        for request in requests:
            seq, self._next_injected = self._next_injected, self._next_injected + 1
            self._injected.add(seq)
            actions.append(ToDebugger(Request(seq=seq, command=request.command,
                                            arguments=request.arguments)))
        return actions

    # -- pydevd -> client -------------------------------------------------------------------

    def from_debugger(self, body: bytes) -> _Pass | list[Action]:
        """What to do with a message body from pydevd: :data:`PASS` (forward its bytes), or
        actions. Raises :class:`~raydebug.errors.RemoteProtocolError` when a body it must
        read is not DAP."""
        self._outstanding.answered(body)
        if not self._injected and not mentions(body, DEBUGGER_WORDS):
            return PASS
        message = parse_message(body)
        if isinstance(message, Response) and message.request_seq in self._injected:
            self._injected.discard(message.request_seq)
            return []
        if isinstance(message, Request):
            return [ToDebugger(Response(seq=0, request_seq=message.seq, command=message.command,
                                      success=False, message=REFUSED))]
        if isinstance(message, Event) and message.event == "terminated":
            self._terminated_sent = True
        actions: list[Action] = [ToClient(message, forwarded=True)]
        if (isinstance(message, Response) and message.command == "configurationDone"
                and message.request_seq == self._configuration_done_seq):
            actions.append(TellAgentReady())
        return actions

    # -- the end ----------------------------------------------------------------------------

    def data_connection_closed(self) -> list[Action]:
        """The data connection has closed: answer every request pydevd left unanswered and say
        ``terminated`` (once; pydevd may have said it already). Afterwards the hub answers
        every request itself. In the order things happened: the resumes the process carried
        out succeed first, then ``terminated``, then the failures, so that a client reading
        an answer "the process has ended" already knows the session is over."""
        self.ended = True
        resumed: list[Action] = []
        failed: list[Action] = []
        for request in self._outstanding.take_all():
            (resumed if request.command in RESUMING else failed).extend(
                self.answer_after_end(request))
        if self._terminated_sent:
            return resumed + failed
        self._terminated_sent = True
        return [*resumed, ToClient(Event(seq=0, event="terminated")), *failed]

    @staticmethod
    def answer_after_end(message: Message) -> list[Action]:
        """Answer a request the process can no longer answer: one of :data:`RESUMING`
        succeeds (the process ran on, then ended; there is nothing left to detach from),
        with ``allThreadsContinued`` for ``continue`` as pydevd says it; anything else
        fails with :data:`PROCESS_ENDED`."""
        if not isinstance(message, Request):
            return []
        if message.command == "continue":
            return [ToClient(success(message, {"allThreadsContinued": True}))]
        if message.command in RESUMING:
            return [ToClient(success(message))]
        return [ToClient(failure(message, PROCESS_ENDED))]
