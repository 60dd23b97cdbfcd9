"""What the hub does with each message of a group session: one client, many processes.

Theory of operation. A *group session* is one DAP session whose threads are those of every
process in a group (a job, a selector's processes); the hub holds a data connection to each
process's debugger (pydevd). :class:`GroupPolicy` decides, without sockets or asyncio, where
each message goes and how it is rewritten, and the hub carries its decisions out (as the
relay does :class:`~.proxy_policy.ProxyPolicy`'s). Its rules, those of one program with many
threads as debugpy treats one process:

- ids: every id the client sees is the group's (:mod:`.group_ids`), every id a process sees
  its own; an id the group does not hold is answered with an error, never routed;
- a request about one thread, frame, variable or source goes to the process that owns it
  (:data:`BY_THREAD`, :data:`BY_FRAME`, :data:`BY_REFERENCE`, :data:`BY_SOURCE`): ``next``,
  ``stepIn``, ``stepOut`` move that thread only, the other processes stay paused;
- ``continue`` resumes every paused process and is answered once, ``allThreadsContinued:
  true`` (DAP "Continue Request": without ``singleThread`` it resumes all threads); with
  ``singleThread`` it goes to that thread's process only and answers ``false``;
- ``pause`` is answered by the hub and pauses the thread's process only, all its threads
  (the group's pause rule: DAP's ``pause`` names one thread, a toolbar sends the selected
  one's, and pausing a whole job on one click would surprise): a joined process through its
  agent (:class:`PauseProcess`), as in a one-process session, a running one through its live
  link (:class:`PauseRunning`); a client that says so (``"pauseTogether": true``) has any
  ``pause`` pause every process of the group;
- running live processes of the group (:mod:`.group_running`) have no debugger: their
  threads are their agents' reports (:class:`AskThreads`), listed by ``threads`` as
  running threads; when one pauses it joins, and its running thread ids exit;
- step together (opt-in, :mod:`.group_steps`): a step also steps, in every other joined
  process, the thread stopped in the same function;
- breakpoint changes reach every joined process's debugger (:meth:`GroupPolicy.configure`);
- ``threads`` asks every process and merges the answers into one (DAP "Threads Request":
  all threads), each named where it lives (:meth:`Member.thread_name`), sorted by rank then
  pid; ``disconnect`` goes to every process (each resumes its threads) and is answered once;
- the group session's own requests (``initialize``, ``attach``, ``configurationDone``, the
  breakpoint requests: the cluster's set, ``terminate``) are the hub's (:class:`HubAnswers`);
- from a process: ``stopped``, ``continued`` and ``thread`` events have their thread mapped
  (a process's ``allThreadsStopped``/``allThreadsContinued`` speaks of its own threads: it
  reaches the client true only when it holds for the whole group; DAP "Continued Event");
  ``output`` is sent by whole lines, each prefixed ``[rank N pid P] `` (:mod:`.group_output`:
  a line is held until its newline, its process stops or leaves, or
  :meth:`GroupPolicy.flush_partial`'s time comes); any other event
  (``initialized``, ``terminated``, ``module``...: one debugger's own) is dropped, and
  reverse requests are refused.

Sequence numbers. The hub numbers what it sends each process on that data connection, from
1 (the set-up it makes itself at :meth:`GroupPolicy.join`, then the client's requests), and
notes each (:mod:`.group_gather`): for which client request (its ``seq``), and for a request
sent to several processes the gather that waits for all of them. A process's answer is
found by its ``request_seq`` among that process's; the client's answer carries the client's
``seq``. What the client receives is numbered by the hub's connection to it (a merged stream
cannot keep any process's numbers), so unlike the relay's there is no byte pass-through.

Every client request gets exactly one answer: a process that leaves (:meth:`GroupPolicy.left`)
owes nothing more to a gathering request, and its single requests are answered by the hub
(a request that only lets it run on succeeds, as after a one-process session's end).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from ..errors import UnknownIdError
from .group_actions import (
    Action,
    AskThreads,
    HubAnswers,
    PauseProcess,
    PauseRunning,
    ProcessReady,
    ToClient,
    ToProcess,
)
from .group_gather import Asked, Gather, Joined, ask, merged
from .group_ids import FRAME, SOURCE, THREAD, VARIABLES, GroupIds
from .group_output import GroupOutput
from .group_rewrite import Member, ProcessAnswer, client_body
from .group_running import RunningMembers
from .group_steps import StepTogether
from .messages import Event, Message, Request, Response, parse_message
from .paths import PathTranslator
from .proxy_policy import CLIENT_PAUSE_WAIT, REFUSED, RESUMING, failure, success

BY_THREAD = frozenset({"stackTrace", "next", "stepIn", "stepOut", "exceptionInfo",
                       "continue", "pause"})
BY_FRAME = frozenset({"scopes", "evaluate", "setExpression", "completions", "stepInTargets"})
BY_REFERENCE = frozenset({"variables", "setVariable"})
BY_SOURCE = frozenset({"source"})
HUBS = frozenset({"initialize", "attach", "configurationDone", "setBreakpoints",
                  "setExceptionBreakpoints", "setFunctionBreakpoints", "terminate"})
STEPS = frozenset({"next", "stepIn", "stepOut"})
PROCESS_LEFT = "the process left the group session (it exited, was killed, or was cut off)"
RUNS = "runs: pause it first (its process has no debugger until it pauses)"


class GroupPolicy:
    """The rules of one group session, from the client's ``attach`` to its ``disconnect``."""

    def __init__(self, allow_terminate: bool = False, step_together: bool = False,
                 pause_together: bool = False) -> None:
        self._allow_terminate = allow_terminate
        self._pause_together = pause_together
        self.ids = GroupIds()
        self._joined: dict[str, Joined] = {}
        self.running = RunningMembers(self.ids)
        self._steps = StepTogether() if step_together else None
        self._output = GroupOutput()

    # -- processes joining and leaving --------------------------------------------------------

    def join(self, member: Member, initialize: dict[str, Any], attach: dict[str, Any],
             configuration: Sequence[Request] = (),
             paths: PathTranslator | None = None) -> list[Action]:
        """A data connection to ``member``'s debugger is open: set it up as a client would
        (``initialize``, ``attach``, then once attached the ``configuration`` requests, such
        as the cluster's breakpoints, and ``configurationDone``). Their answers are the
        hub's; the last brings :class:`ProcessReady`. ``paths``: its code's directory and
        the client's checkout (the attach's ``localRoot``), translated both ways."""
        actions = self.not_running(member.key)
        joined = self._joined[member.key] = Joined(member, list(configuration), paths)
        return [*actions,
                ask(joined, Request(0, "initialize", initialize), Asked("initialize", None)),
                ask(joined, Request(0, "attach", attach), Asked("attach", None))]

    def configure(self, key: str, requests: Sequence[Request]) -> list[Action]:
        """Send ``requests`` (the breakpoint set's changes) to ``key``'s debugger as the
        hub's own: now if it is attached, else after its attach, before its
        ``configurationDone``."""
        joined = self._joined.get(key)
        if joined is None:
            return []
        if not joined.attached:
            joined.configuration.extend(requests)
            return []
        return [ask(joined, request, Asked(request.command, None))
                for request in requests]

    def runs(self, member: Member) -> list[Action]:
        """``member`` is a running live process of the group, with no debugger connection:
        its threads are asked of its agent (:class:`AskThreads`), then shown as running
        threads (:mod:`.group_running`)."""
        if member.key in self._joined or not self.running.add(member):
            return []
        return [AskThreads((member.key,))]

    def running_threads(self, key: str, threads: Sequence[dict[str, Any]] | None
                        ) -> list[Action]:
        """Running process ``key``'s agent reported its ``threads`` (None: it did not
        answer in time; its last report stands)."""
        if key not in self.running:
            return []
        actions: list[Action] = [ToClient(event) for event in
                                 self.running.reported(key, threads)]
        return actions + [action for gather in self.running.report_given(key)
                          for action in self._complete(gather)]

    def not_running(self, key: str) -> list[Action]:
        """``key`` no longer runs in the group (it paused, exited, or another client took
        it): the client is told its running threads exited."""
        if key not in self.running:
            return []
        actions: list[Action] = [ToClient(event) for event in self.running.remove(key)]
        return actions + [action for gather in self.running.report_given(key)  # (no threads)
                          for action in self._complete(gather)]

    def left(self, key: str) -> list[Action]:
        """Process ``key``'s data connection has closed: what it owed is answered (a
        gathering request no longer waits for it), and the client is told its threads
        exited."""
        joined = self._joined.pop(key, None)
        if joined is None:
            return self.not_running(key)
        if self._steps is not None:
            self._steps.moved(key)
        actions = self._shown(self._output.flush(key))  # its unfinished lines, before its exits
        for asked in joined.asked.values():
            if asked.gather is not None:
                asked.gather.owed.discard(key)
                actions.extend(self._complete(asked.gather))
            elif asked.request is not None:
                actions.append(self._answer_after_left(asked.request))
        actions.extend(ToClient(Event(0, "thread", {"reason": "exited", "threadId": client}))
                       for client in self.ids.left(key))
        return actions

    # -- client -> processes ------------------------------------------------------------------

    def from_client(self, message: Message) -> list[Action]:
        """What to do with a message from the client: every request gets one answer, from a
        process, from several merged, or from the hub."""
        if not isinstance(message, Request):
            return []  # the group session sends the client no reverse requests
        command = message.command
        if command in HUBS:
            return [HubAnswers(message)]
        if command == "threads":
            return self._threads(message)
        if command == "disconnect":
            return self._disconnect(message)
        if command == "continue" and not message.arguments.get("singleThread"):
            return self._continue_all(message)
        if command == "pause" and self._pause_together:
            return self._pause_all(message)
        try:
            return self._to_owner(message)
        except UnknownIdError as error:
            return [ToClient(failure(message, str(error)))]

    def _to_owner(self, request: Request) -> list[Action]:
        arguments = dict(request.arguments)
        command = request.command
        if command in BY_THREAD:
            owner = self.ids.to_local(THREAD, arguments.get("threadId"))
            arguments["threadId"] = owner.local
        elif command in BY_FRAME:
            if "frameId" not in arguments:
                return [ToClient(failure(request, f"{command} in a group session needs a "
                                                  "frame: select a thread's frame first"))]
            owner = self.ids.to_local(FRAME, arguments["frameId"])
            arguments["frameId"] = owner.local
        elif command in BY_REFERENCE:
            owner = self.ids.to_local(VARIABLES, arguments.get("variablesReference"))
            arguments["variablesReference"] = owner.local
        elif command in BY_SOURCE:
            source = dict(arguments.get("source") or {})
            owner = self.ids.to_local(SOURCE, source.get("sourceReference",
                                                         arguments.get("sourceReference")))
            source["sourceReference"] = arguments["sourceReference"] = owner.local
            arguments["source"] = source
        else:
            return [ToClient(failure(request, f"{command} is not served in a group session"))]
        running = self.running.owner(owner.process)
        if running is not None:
            return self._to_running(request, running, owner.local)
        joined = self._joined.get(owner.process)
        if joined is None:  # the ids of a process that left go with it: not reached
            return [ToClient(failure(request, PROCESS_LEFT))]
        if command == "pause":
            return [ToClient(success(request)),
                    PauseProcess(owner.process, round(CLIENT_PAUSE_WAIT * 1000))]
        actions: list[Action] = []
        if command in STEPS and self._steps is not None:  # before it forgets where it is
            actions = self._step_companions(command, arguments, joined, owner.local)
        if command in STEPS or command == "continue":
            self._moved(joined, owner.local)
        outgoing = Request(0, command, arguments)
        if joined.paths is not None:
            outgoing = joined.paths.request_to_remote(outgoing)
        return [ask(joined, outgoing, Asked(command, request, thread=owner.thread)), *actions]

    def _to_running(self, request: Request, key: str, local: int) -> list[Action]:
        """A request about a thread of running process ``key`` (no debugger yet): ``pause``
        pauses that process (the group's pause rule: the thread's process only), a
        ``continue`` of it succeeds (it runs), anything else needs it paused first."""
        if request.command == "pause":
            return [ToClient(success(request)), PauseRunning(key)]
        if request.command == "continue":
            return [ToClient(success(request, {"allThreadsContinued": False}))]
        return [ToClient(failure(request, f"thread {request.arguments.get('threadId')} "
                                          f"({self.running.thread_name(key, local)}) {RUNS}"))]

    def _pause_all(self, request: Request) -> list[Action]:
        """``pauseTogether``: a ``pause`` of any thread of the group pauses every process of
        it, joined (its agent; stopped threads stay as they are) and running (its link)."""
        try:
            self.ids.to_local(THREAD, request.arguments.get("threadId"))
        except UnknownIdError as error:
            return [ToClient(failure(request, str(error)))]
        wait_ms = round(CLIENT_PAUSE_WAIT * 1000)
        return [ToClient(success(request)),
                *(PauseProcess(key, wait_ms) for key in self._joined),
                *(PauseRunning(key) for key in self.running)]

    def _moved(self, joined: Joined, local: int | None) -> None:
        """``local`` of ``joined`` (None: every thread) runs on: its stop and ids go."""
        if local is None:
            joined.stopped.clear()
        else:
            joined.stopped.discard(local)
        self.ids.resumed(joined.member.key, local)
        if self._steps is not None:
            self._steps.moved(joined.member.key, local)

    def _step_companions(self, command: str, arguments: dict[str, Any], stepping: Joined,
                         local: int) -> list[Action]:
        """Step together: the same step for the thread of every other paused process stopped
        in the same function (:mod:`.group_steps`), as the hub's own; the client is told
        those threads ran on (``continued``), their ``stopped`` follows as any."""
        assert self._steps is not None
        stopped = {key: joined.stopped for key, joined in self._joined.items()}
        actions: list[Action] = []
        for key, thread in self._steps.companions(stepping.member.key, local, stopped):
            joined = self._joined[key]
            self._moved(joined, thread)
            actions.append(ask(joined, Request(0, command, {**arguments,
                                                                  "threadId": thread}),
                                     Asked(command, None, thread=thread)))
            actions.append(ToClient(Event(0, "continued", {
                "threadId": self.ids.thread_to_client(key, thread),
                "allThreadsContinued": False})))
        return actions

    def _threads(self, request: Request) -> list[Action]:
        """Every joined process's debugger is asked, every running process's agent too
        (:class:`AskThreads`); one answer once all have answered or left."""
        gather = Gather(request, set(self._joined) | set(self.running))
        actions: list[Action] = []
        for joined in self._joined.values():
            actions.append(ask(joined, Request(0, "threads", request.arguments),
                                     Asked("threads", request, gather)))
        if self.running:
            self.running.owe(gather)
            actions.append(AskThreads(tuple(self.running)))
        return actions or self._complete(gather)

    def _continue_all(self, request: Request) -> list[Action]:
        paused = [joined for joined in self._joined.values() if joined.stopped]
        return self._gather(request, paused, lambda joined: {"threadId": min(joined.stopped)},
                            clear_stopped=True)

    def _disconnect(self, request: Request) -> list[Action]:
        arguments = {"terminateDebuggee": bool(self._allow_terminate and request.arguments.get(
            "terminateDebuggee"))}
        return self._gather(request, list(self._joined.values()), lambda _: arguments,
                            clear_stopped=True)

    def _gather(self, request: Request, targets: list[Joined],
                arguments: Callable[[Joined], dict[str, Any]] | None = None,
                clear_stopped: bool = False) -> list[Action]:
        """Send ``request`` to each of ``targets`` (with ``arguments(target)``, or the
        client's), to be answered once when each has answered or left: at once if none."""
        gather = Gather(request, {joined.member.key for joined in targets})
        actions: list[Action] = []
        for joined in targets:
            sent = arguments(joined) if arguments else request.arguments
            actions.append(ask(joined, Request(0, request.command, sent),
                                     Asked(request.command, request, gather)))
            if clear_stopped:
                self._moved(joined, None)
        return actions or self._complete(gather)

    # -- processes -> client ------------------------------------------------------------------

    def from_process(self, key: str, body: bytes, now: float) -> list[Action]:
        """What to do with a message body from process ``key``'s debugger, received at
        ``now`` (seconds, the caller's clock: an unfinished output line is held from then
        until :meth:`flush_partial`). Raises :class:`~raydebug.errors.RemoteProtocolError`
        when it is not DAP."""
        joined = self._joined.get(key)
        if joined is None:
            return []  # it has left: what it says now is of no one's concern
        message = parse_message(body if joined.paths is None else joined.paths.to_local(body))
        if isinstance(message, Request):
            return [ToProcess(key, Response(0, message.seq, message.command, success=False,
                                            message=REFUSED))]
        if isinstance(message, Event):
            return self._event(joined, message, now)
        asked = joined.asked.pop(message.request_seq, None)
        if asked is None:
            return []
        if asked.request is None:
            return self._set_up(joined, asked, message)
        if (self._steps is not None and asked.command == "stackTrace" and message.success
                and asked.thread is not None and not asked.request.arguments.get("startFrame")):
            self._steps.stopped_in(key, asked.thread, message.body.get("stackFrames", []))
        if not message.success:
            answer = Response(0, asked.request.seq, asked.request.command, success=False,
                              message=message.message, body=message.body)
        else:
            answer = Response(0, asked.request.seq, asked.request.command,
                              body=client_body(ProcessAnswer(self.ids, joined.member,
                                                             asked.thread),
                                               asked.command, message.body))
        if asked.gather is not None:
            asked.gather.owed.discard(key)
            asked.gather.answers.append((joined.member, answer))
            return self._complete(asked.gather)
        return [ToClient(answer)]

    def _set_up(self, joined: Joined, asked: Asked, answer: Response) -> list[Action]:
        """The answer to the hub's own request: attached, configure; configured, the
        process's agent may go on; a stopped thread's top frame, step together knows where it
        is. A refusal is told on the client's console."""
        if asked.command == "stackTrace":
            if answer.success and self._steps is not None and asked.thread is not None:
                self._steps.stopped_in(joined.member.key, asked.thread,
                                       answer.body.get("stackFrames", []))
            return []
        if not answer.success:
            text = f"{joined.member.prefix}{asked.command} failed: {answer.message}\n"
            return [ToClient(Event(0, "output", {"category": "console", "output": text}))]
        if asked.command == "attach":
            joined.attached = True
            return [ask(joined, request, Asked(request.command, None))
                    for request in [*joined.configuration, Request(0, "configurationDone")]]
        if asked.command == "configurationDone":
            return [ProcessReady(joined.member.key)]
        return []

    def flush_partial(self, now: float) -> list[Action]:
        """The output lines held unfinished since :data:`~.group_output.PARTIAL_LINE_WAIT`
        before ``now``, sent as they are (the caller calls it at :meth:`output_deadline`)."""
        return self._shown(self._output.due(now))

    def output_deadline(self) -> float | None:
        """When :meth:`flush_partial` next has a line to send (None: no line is held)."""
        return self._output.deadline()

    def _shown(self, pieces: list[tuple[Member, dict[str, Any]]]) -> list[Action]:
        return [ToClient(Event(0, "output", ProcessAnswer(self.ids, member, None)
                               .reference(body))) for member, body in pieces]

    def _event(self, joined: Joined, event: Event, now: float) -> list[Action]:
        if event.event == "output":
            return self._shown(self._output.piece(joined.member, event.body, now))
        handler = self._EVENTS.get(event.event)
        if handler is None:  # a debugger's own lifecycle (``initialized``...) is not the group's
            return []
        if not isinstance(event.body.get("threadId"), int):
            return []
        if event.event == "stopped":  # the prompt that follows would hide its unfinished line
            return self._shown(self._output.flush(joined.member.key)) + handler(
                self, joined, event.body)
        return handler(self, joined, event.body)

    def stopped_event(self, joined: Joined, body: dict[str, Any]) -> list[Action]:
        joined.stopped.add(body["threadId"])
        everywhere = body.get("allThreadsStopped") and all(
            other.stopped for other in self._joined.values())
        actions = self._thread_event(joined, "stopped", {**body,
                                                         "allThreadsStopped": bool(everywhere)})
        if self._steps is not None:  # where it stopped, for step together
            actions.append(ask(joined, Request(0, "stackTrace", {
                "threadId": body["threadId"], "levels": 1}),
                Asked("stackTrace", None, thread=body["threadId"])))
        return actions

    def continued_event(self, joined: Joined, body: dict[str, Any]) -> list[Action]:
        local = body["threadId"]
        every_thread = body.get("allThreadsContinued", True)  # DAP: omitted means true
        self._moved(joined, None if every_thread else local)
        everywhere = not any(other.stopped for other in self._joined.values())
        return self._thread_event(joined, "continued", {**body,
                                                        "allThreadsContinued": everywhere})

    def thread_event(self, joined: Joined, body: dict[str, Any]) -> list[Action]:
        if body.get("reason") != "exited":
            return self._thread_event(joined, "thread", body)
        self._moved(joined, body["threadId"])
        client = self.ids.thread_exited(joined.member.key, body["threadId"])
        return [] if client is None else [ToClient(Event(0, "thread", {**body,
                                                                      "threadId": client}))]

    def _thread_event(self, joined: Joined, name: str, body: dict[str, Any]) -> list[Action]:
        client = self.ids.thread_to_client(joined.member.key, body["threadId"])
        return [ToClient(Event(0, name, {**body, "threadId": client}))]

    _EVENTS: dict[str, Callable[[GroupPolicy, Joined, dict[str, Any]], list[Action]]] = {
        "stopped": stopped_event, "continued": continued_event, "thread": thread_event}

    # -- answers ------------------------------------------------------------------------------

    def _complete(self, gather: Gather) -> list[Action]:
        """The one answer to a gathered request, once no process owes it anything."""
        if gather.owed:
            return []
        # A process that left after answering has had its threads' exits told.
        return [ToClient(merged(gather, lambda key: key in self._joined
                                or key in self.running))]

    @staticmethod
    def _answer_after_left(request: Request) -> ToClient:
        if request.command == "continue":
            return ToClient(success(request, {"allThreadsContinued": False}))
        if request.command in RESUMING:
            return ToClient(success(request))
        return ToClient(failure(request, PROCESS_LEFT))

    def statistics(self) -> dict[str, int]:
        """Processes joined, requests they have not answered, and the ids held."""
        return {"joined": len(self._joined),
                "asked": sum(len(joined.asked) for joined in self._joined.values()),
                **self.ids.statistics()}
