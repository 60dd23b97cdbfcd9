"""A snapshot served as a read-only DAP session: the hub's own debug adapter over one capture.

Theory of operation. :class:`SnapshotSession` holds one :class:`~raydebug.snapshots.format.
Snapshot` and answers a client's requests about it: :meth:`SnapshotSession.handle` takes one
request and returns the messages to send, its one response first, then any events. Nothing
runs: every answer is read from the capture, so nothing here waits and no request can go
unanswered. The hub carries the messages over the client's connection.

The conversation is the one a client has with a paused process (DAP overview, "Launch
Sequencing"): ``attach`` is answered and followed by ``initialized`` (and a ``capabilities``
event that takes back what a process offers and a snapshot cannot do: the hub answered
``initialize`` before the client chose); after ``configurationDone``, ``stopped`` on the one
thread (reason ``exception`` for a failure, whose ``exceptionInfo`` the thread then answers,
else ``snapshot``). Then:

- ``threads``: one thread, named as the group session names a process's (``rank 3 ·
  train_step · pid 4242 · MainThread``), id :data:`THREAD_ID`;
- ``stackTrace``: the captured frames, innermost first, ids 1..n; a frame whose file text was
  captured carries a ``sourceReference`` (DAP: the client then reads it through ``source``,
  even with a ``path``): the text the process ran, not the client's copy, which may differ
  or be missing;
- ``scopes``: one, ``Locals``; ``variables``: the captured tree, each value with children
  expandable by its ``variablesReference`` and reachable by its ``evaluateName``; a container
  the capture cut ends with a ``...`` entry saying so;
- ``evaluate``: names and paths into the frame's captured values
  (:mod:`raydebug.snapshots.value_paths`), never code;
- ``continue`` ends the view (``terminated``), as does ``disconnect`` (:attr:`over`: the
  hub closes the connection); stepping, pausing and changing values are refused with a
  message that says why; any other command is refused by name.

Ids are small and stable for the session's life: the snapshot never changes, so a value
keeps its ``variablesReference`` however often it is reached.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from ..errors import SnapshotEvaluateError
from ..snapshots.format import FrameCapture, Snapshot, Value
from ..snapshots.value_paths import child_path, evaluate
from .group_rewrite import Member
from .messages import Event, Message, Request
from .proxy_policy import PYDEVD_CAPABILITIES, failure, success

THREAD_ID = 1

# What a snapshot answers to initialize, and what the capabilities event corrects a
# process's (pydevd's) to: of those, only these stay; nothing that runs or changes.
_KEPT = ("supportsConfigurationDoneRequest", "supportsExceptionInfoRequest",
         "supportsEvaluateForHovers", "supportsCompletionsRequest", "supportsClipboardContext",
         "supportsDelayedStackTraceLoading")
CAPABILITIES: dict[str, Any] = {
    **{name: name in _KEPT for name, offered in PYDEVD_CAPABILITIES.items()
       if isinstance(offered, bool)},
    "supportsTerminateRequest": False, "supportTerminateDebuggee": False,
    "supportsStepBack": False, "supportsRestartFrame": False,
    "exceptionBreakpointFilters": [],
}

CANNOT_RUN = ("is a capture of one moment of a process that has run on since: it cannot "
              "{what}, only show what was captured (continue or disconnect ends the view)")
# Commands that would run or change the debuggee, and what the refusal says it cannot do.
REFUSED = {
    "next": "step", "stepIn": "step", "stepOut": "step", "stepBack": "step",
    "reverseContinue": "run backwards", "goto": "jump", "restartFrame": "restart a frame",
    "pause": "pause (it is not running)", "setVariable": "change a value",
    "setExpression": "change a value", "terminate": "be terminated",
    "restart": "be restarted",
}
BREAKPOINTS_DO_NOT_APPLY = "a snapshot does not run: breakpoints do not apply to it"
ENDED = "the snapshot's view has ended (continue): disconnect"
CLOSED = "the snapshot's view is closed (disconnect)"


class SnapshotSession:
    """The read-only DAP session of one snapshot. Not thread-safe; one per client."""

    def __init__(self, snapshot: Snapshot) -> None:
        self.snapshot = snapshot
        self.over = False  # disconnected: the hub closes the connection
        self._ended = False  # continued: only disconnect is answered now
        self._stopped_sent = False
        # variablesReference -> (the values it lists, their parent's expression or None)
        self._variables: list[tuple[Sequence[Value], str | None, bool]] = []
        self._reference_of: dict[int, int] = {}  # id() of a frame or Value -> its reference
        self._sources: list[str] = []  # sourceReference - 1 -> path
        for frame in snapshot.frames:
            if frame.source is not None and frame.path not in self._sources:
                self._sources.append(frame.path)

    def handle(self, request: Request) -> list[Message]:
        """The answer to ``request`` (exactly one response, first) and the events after it."""
        if self.over:
            return [failure(request, CLOSED)]
        if self._ended and request.command != "disconnect":
            return [failure(request, ENDED)]
        if request.command in REFUSED:
            return [failure(request, f"{self.name} " + CANNOT_RUN.format(
                what=REFUSED[request.command]))]
        answer: Callable[[Request], list[Message]] | None = getattr(
            self, f"{request.command}_request", None)
        if answer is None:
            return [failure(request, f"{request.command!r} does not apply to a snapshot "
                                     f"({self.name})")]
        try:
            return answer(request)
        except (KeyError, TypeError, ValueError, IndexError) as error:  # bad arguments
            return [failure(request, f"{request.command}: bad arguments ({error})")]

    @property
    def name(self) -> str:
        return f"snapshot {self.snapshot.id}"

    def capabilities_event(self) -> Event:
        """What a process offers and a snapshot does not (DAP ``capabilities`` event), for a
        client whose ``initialize`` the hub answered before it chose a snapshot."""
        return Event(seq=0, event="capabilities", body={"capabilities": CAPABILITIES})

    # -- set-up -----------------------------------------------------------------------------

    def initialize_request(self, request: Request) -> list[Message]:
        return [success(request, CAPABILITIES)]

    def attach_request(self, request: Request) -> list[Message]:
        return [success(request), Event(seq=0, event="initialized"),
                self.capabilities_event(), self._banner()]

    def configurationDone_request(self, request: Request) -> list[Message]:
        messages: list[Message] = [success(request)]
        if not self._stopped_sent:
            self._stopped_sent = True
            messages.append(self._stopped())
        return messages

    def setBreakpoints_request(self, request: Request) -> list[Message]:
        lines = request.arguments.get("breakpoints") or []
        return [success(request, {"breakpoints": [
            {"verified": False, "message": BREAKPOINTS_DO_NOT_APPLY,
             "line": point.get("line")} for point in lines]})]

    def setFunctionBreakpoints_request(self, request: Request) -> list[Message]:
        wanted = request.arguments.get("breakpoints") or []
        return [success(request, {"breakpoints": [
            {"verified": False, "message": BREAKPOINTS_DO_NOT_APPLY} for _ in wanted]})]

    def setExceptionBreakpoints_request(self, request: Request) -> list[Message]:
        return [success(request)]

    def _banner(self) -> Event:
        snapshot = self.snapshot
        what = (f"{snapshot.exception.type_name}: {snapshot.exception.message}"
                if snapshot.exception else "a snapshot point's hit")
        text = (f"raydebug: {self.name} of pid {snapshot.process.get('pid', '?')}, {what}; "
                "read-only: values as captured, no stepping\n")
        return Event(seq=0, event="output", body={"category": "console", "output": text})

    def stopped(self) -> Event:
        """The ``stopped`` event of its one thread (sent once after ``configurationDone``;
        a group session sends it again after a refused step)."""
        return self._stopped()

    def _stopped(self) -> Event:
        exception = self.snapshot.exception
        body: dict[str, Any] = {"threadId": THREAD_ID, "allThreadsStopped": True,
                                "preserveFocusHint": False}
        if self.snapshot.reason == "exception" and exception is not None:
            body.update(reason="exception", description=f"{exception.type_name} (snapshot)",
                        text=f"{exception.type_name}: {exception.message}")
        else:
            body.update(reason="snapshot", description="Snapshot")
        return Event(seq=0, event="stopped", body=body)

    # -- the thread and its stack -----------------------------------------------------------

    def threads_request(self, request: Request) -> list[Message]:
        return [success(request, {"threads": [{"id": THREAD_ID, "name": self.thread_name}]})]

    @property
    def thread_name(self) -> str:
        process = self.snapshot.process
        labels = process.get("labels") or {}
        rank = labels.get("RANK", labels.get("rank")) if isinstance(labels, dict) else None
        member = Member(self.snapshot.id, int(process.get("pid") or 0),
                        None if rank is None else str(rank), process.get("task_name"))
        return member.thread_name(self.snapshot.thread_name)

    def stackTrace_request(self, request: Request) -> list[Message]:
        self._thread(request)
        frames = self.snapshot.frames
        start = int(request.arguments.get("startFrame") or 0)
        levels = int(request.arguments.get("levels") or 0)
        shown = frames[start:start + levels] if levels > 0 else frames[start:]
        return [success(request, {"stackFrames": [self._frame(start + offset, frame)
                                                  for offset, frame in enumerate(shown)],
                                  "totalFrames": len(frames)})]

    def _frame(self, index: int, frame: FrameCapture) -> dict[str, Any]:
        source: dict[str, Any] = {"name": frame.path.replace("\\", "/").rsplit("/", 1)[-1],
                                  "path": frame.path}
        if frame.source is not None:
            source["sourceReference"] = self._sources.index(frame.path) + 1
            source["origin"] = self.name
        return {"id": index + 1, "name": frame.function, "line": frame.line, "column": 1,
                "source": source}

    def source_request(self, request: Request) -> list[Message]:
        reference = int(request.arguments.get("sourceReference") or 0)
        path = ((request.arguments.get("source") or {}).get("path")
                if not reference else None)
        if reference:
            path = self._sources[reference - 1] if 0 < reference <= len(self._sources) \
                else None
        text = next((frame.source for frame in self.snapshot.frames
                     if frame.path == path and frame.source is not None), None)
        if text is None:
            return [failure(request, f"{self.name} holds no source for "
                                     f"{path or f'reference {reference}'}")]
        return [success(request, {"content": text, "mimeType": "text/x-python"})]

    def exceptionInfo_request(self, request: Request) -> list[Message]:
        self._thread(request)
        exception = self.snapshot.exception
        if exception is None:
            return [failure(request, f"{self.name} was taken at a snapshot point, not of an "
                                     "exception")]
        return [success(request, {
            "exceptionId": exception.type_name, "description": exception.message,
            "breakMode": "unhandled",
            "details": {"message": exception.message, "typeName": exception.type_name,
                        "fullTypeName": exception.type_name,
                        "stackTrace": self._stack_text()}})]

    def _stack_text(self) -> str:
        """The captured frames as pydevd writes an exception's stack (newest first, each
        ``File`` line and its code), which clients show and ``raydebug attach`` reorders."""
        lines = []
        for frame in self.snapshot.frames:
            lines.append(f'  File "{frame.path}", line {frame.line}, in {frame.function}\n')
            source = (frame.source or "").splitlines()
            if 0 < frame.line <= len(source) and source[frame.line - 1].strip():
                lines.append(f"    {source[frame.line - 1].strip()}\n")
        return "".join(lines)

    def _thread(self, request: Request) -> None:
        thread = request.arguments.get("threadId", THREAD_ID)
        if thread != THREAD_ID:
            raise ValueError(f"no thread {thread}: {self.name} has one, {THREAD_ID}")

    def _frame_of(self, request: Request) -> FrameCapture:
        """The frame ``frameId`` names (the innermost when it names none)."""
        frame_id = request.arguments.get("frameId")
        if not self.snapshot.frames:
            raise ValueError(f"{self.name} holds no frames")
        if frame_id is None:
            return self.snapshot.frames[0]
        if not isinstance(frame_id, int) or not 0 < frame_id <= len(self.snapshot.frames):
            raise ValueError(f"no frame {frame_id} in {self.name}")
        return self.snapshot.frames[frame_id - 1]

    # -- values -----------------------------------------------------------------------------

    def scopes_request(self, request: Request) -> list[Message]:
        frame = self._frame_of(request)
        reference = self._reference(frame, frame.locals, "", False)
        return [success(request, {"scopes": [{
            "name": "Locals", "presentationHint": "locals", "variablesReference": reference,
            "namedVariables": len(frame.locals), "expensive": False}]})]

    def variables_request(self, request: Request) -> list[Message]:
        reference = int(request.arguments["variablesReference"])
        if not 0 < reference <= len(self._variables):
            raise ValueError(f"no variablesReference {reference} in {self.name}")
        values, parent, cut = self._variables[reference - 1]
        shown = [self._variable(value, parent) for value in values]
        if cut:
            shown.append({"name": "...", "value": f"(the snapshot kept these {len(values)})",
                          "variablesReference": 0, "presentationHint": {"kind": "virtual"}})
        return [success(request, {"variables": shown})]

    def _variable(self, value: Value, parent: str | None) -> dict[str, Any]:
        if parent is None:
            path = None
        elif parent == "":  # a local; a name that is no identifier marks what was cut
            path = value.name if value.name.isidentifier() else None
        else:
            path = child_path(parent, value)
        variable: dict[str, Any] = {"name": value.name, "value": value.repr,
                                    "type": value.type_name,
                                    "variablesReference": self._value_reference(value, path)}
        if path is not None:
            variable["evaluateName"] = path
        return variable

    def _value_reference(self, value: Value, path: str | None) -> int:
        if value.children is None:
            return 0
        return self._reference(value, value.children, path, value.truncated)

    def _reference(self, owner: object, values: Sequence[Value], path: str | None,
                   cut: bool) -> int:
        """The variablesReference listing ``values`` (the parts of ``owner``, whose
        expression is ``path``; "" for a frame's locals), the same each time it is asked."""
        known = self._reference_of.get(id(owner))
        if known is None:
            self._variables.append((values, path, cut))
            known = self._reference_of[id(owner)] = len(self._variables)
        return known

    def evaluate_request(self, request: Request) -> list[Message]:
        frame = self._frame_of(request)
        expression = str(request.arguments["expression"])
        try:
            value = evaluate(expression, frame.locals)
        except SnapshotEvaluateError as error:
            return [failure(request, str(error))]
        return [success(request, {"result": value.repr, "type": value.type_name,
                                  "variablesReference": self._value_reference(
                                      value, expression.strip())})]

    def completions_request(self, request: Request) -> list[Message]:
        """The frame's local names that the word before the cursor starts."""
        frame = self._frame_of(request)
        text = str(request.arguments.get("text", ""))
        column = int(request.arguments.get("column", len(text) + 1)) - 1
        before = text[:column]
        start = len(before)
        while start > 0 and (before[start - 1].isalnum() or before[start - 1] == "_"):
            start -= 1
        word = before[start:]
        if start > 0 and before[start - 1] in ".[":
            return [success(request, {"targets": []})]  # inside a path: names only
        return [success(request, {"targets": [
            {"label": value.name, "type": "variable", "start": start, "length": len(word)}
            for value in frame.locals
            if value.name.isidentifier() and value.name.startswith(word)]})]

    # -- the end ----------------------------------------------------------------------------

    def continue_request(self, request: Request) -> list[Message]:
        self._ended = True
        return [success(request, {"allThreadsContinued": True}),
                Event(seq=0, event="terminated")]

    def disconnect_request(self, request: Request) -> list[Message]:
        self.over = True
        return [success(request)]
