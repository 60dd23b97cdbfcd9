"""A group session: one DAP session whose threads are those of every paused process of a group.

Theory of operation. An attach with ``"raydebug": {"group": true}`` (every process the hub
knows) or ``{"group": "<selector>"}`` (the CLI's syntax, :mod:`raydebug.selectors`) is served
on the client's connection by :class:`GroupSession` until the client leaves; no
``startDebugging`` is sent. Where each message goes and how it is rewritten is decided by
:class:`~raydebug.protocol.group_policy.GroupPolicy`; this module carries its decisions out
(:meth:`GroupSession.carry_out`) and holds the sockets.

The hub answers the session's own requests (``initialize``, ``attach``: answered and
followed by ``initialized``; the breakpoint requests: the cluster's breakpoint set, as a
cluster session's; ``configurationDone``; ``terminate``, which ends the group session only).
Once the client's ``configurationDone`` is answered, each paused process of the group (now,
and each that pauses later) is bound to this session as a child session's process would be
(one client per process), a data connection to its debugger is opened, and the policy
``join``\\ s it: the hub sends it the client's ``initialize`` and ``attach``, the breakpoint
set, ``configurationDone``, then tells its agent ``ClientReady``. A process busy with another
client is left out. Each body its debugger sends goes to ``from_process``; when its data
connection ends (the process exited or was cut off), ``left``. Each running live process of
the group (no client, no thread paused) is shown too (``runs``): its threads are asked of
its agent through the hub's :class:`~raydebug.hub.processes.ProcessQueries` (``stacks``,
bounded by :data:`RUNNING_THREADS_TIMEOUT`), and a ``pause`` of one is that class's
``pause``, as ``raydebug pause``'s. The session follows the cluster's breakpoint set: each
change reaches every joined process's debugger. A group with no process yet says so once.

Ends. When the client disconnects or its connection drops, :meth:`GroupSession.run` cancels
every joining and reading task and awaits them, then for each bound process tells its agent
``ClientGone``, detaches it, and hands back its data connection; after the client's
``disconnect`` (every process resumed), the sessions that process had when the
``disconnect`` went out end (a stop that came after is a new session, waiting for a client).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from typing import Any

from ...errors import PeerClosed, RaydebugError, SessionBusyError, SessionNotFoundError
from ...protocol import Event, Request, Response
from ...protocol.control import ClientGone, ClientReady, OpenDataConnection, Pause
from ...protocol.group_actions import (
    Action,
    AskThreads,
    HubAnswers,
    PauseProcess,
    PauseRunning,
    ProcessReady,
    ToClient,
    ToProcess,
)
from ...protocol.group_policy import GroupPolicy
from ...protocol.group_rewrite import Member
from ...protocol.group_snapshots import GroupSnapshots
from ...protocol.paths import PathTranslator
from ...protocol.proxy_policy import CLIENT_PAUSE_WAIT, adapter_capabilities
from ...selectors import Selector, parse
from ...session import ProcessState, SessionState
from ..agents.data_connections import PendingDataConnections
from ..agents.data_stream import DataStream
from ..cluster_breakpoints import DapSessionBreakpoints
from ..entries import HubSession, Process
from ..processes import ProcessQueries
from ..registry import Registry
from ..snapshot_store import SnapshotStore
from .cluster_sessions import ClusterSessions, local_root_of
from .snapshot_view import KEPT_OFFERED, wants_snapshots
from .stream import ClientStream

log = logging.getLogger("raydebug.hub")

# How long a process's agent has to open its data connection (as a child session's attach).
SET_UP_TIMEOUT = 30.0
# Data connections being opened at once: a job's 1,000 processes dialling the hub together
# overflow its listen backlog (asyncio's is 100), and a dropped SYN is retried after 1, 2,
# 4... s: measured, a third of 1,000 missed the 30 s set-up (bench/group_scale.py).
SET_UP_CONCURRENCY = 64
# How long a ``threads`` answer waits for a running process's agent to report its threads
# (one that has not answered by then is listed with its last report).
RUNNING_THREADS_TIMEOUT = 1.0
# A running process's report younger than this answers a ``threads`` as it is: an editor asks
# ``threads`` at every stop, and a job's 1,000 stops must not ask 1,000 stacks of each.
RUNNING_THREADS_FRESH = 1.0


def wants_group(attach: Request) -> bool:
    """Whether an attach asks for a group session: ``"raydebug": {"group": ...}`` set, and
    not false."""
    settings = attach.arguments.get("raydebug")
    group = settings.get("group") if isinstance(settings, dict) else None
    return group is not None and group is not False


def group_selector(attach: Request) -> Selector | None:
    """The processes a group attach wants: None for ``true`` (every process), else its
    selector. Raises :class:`~raydebug.errors.SelectorError` for one that does not parse."""
    group = attach.arguments["raydebug"]["group"]
    if group is True or not str(group).strip():
        return None
    return parse(str(group).split())


def asks(attach: Request, setting: str) -> bool:
    """Whether a group attach turns ``setting`` on (``"stepTogether": true``,
    ``"pauseTogether": true``)."""
    return attach.arguments["raydebug"].get(setting) is True


def labels_of(process: Process) -> dict[str, str]:
    """A process's labels: its record's, and its sessions' (a process that is not live
    has them in its sessions' records only)."""
    labels = dict(process.record.labels or {})
    for session in process.sessions.values():
        labels = {**(session.record.labels or {}), **labels}
    return labels


def member_of(process: Process) -> Member:
    """The process as the group's client is shown it: pid, rank label, task (the one its
    paused threads stopped in; for a running one, what it ran when last asked: a Ray
    worker's record names the task it ran when it linked, often none)."""
    labels = labels_of(process)
    rank = labels.get("RANK", labels.get("rank"))
    tasks = [s.record.task_name for s in process.sessions.values() if s.record.task_name]
    return Member(process.id, process.record.pid, None if rank is None else str(rank),
                  tasks[0] if tasks else process.reported("task_name"))


@dataclass
class _Bound:
    """A process bound to the group session: its data connection, once open."""

    process: Process
    data_id: int = 0
    debugger: DataStream | None = None
    breakpoints: DapSessionBreakpoints | None = None  # what its debugger was sent
    on_lost: Callable[[], None] | None = None  # its callback in the process's on_lost


class GroupSession:
    """Serves a group attach on an existing client connection, until the client leaves."""

    def __init__(self, client: ClientStream, registry: Registry,
                 data_connections: PendingDataConnections, parents: ClusterSessions,
                 allow_terminate: bool, initialize: Request | None, attach: Request,
                 selector: Selector | None, queries: ProcessQueries | None = None,
                 snapshots: SnapshotStore | None = None) -> None:
        self._client = client
        self._registry = registry
        self._data_connections = data_connections
        self._parents = parents
        self._allow_terminate = allow_terminate
        self._initialize = initialize.arguments if initialize else {"adapterID": "raydebug"}
        self._attach = attach
        self._selector = selector
        self._queries = queries  # None: running processes are not shown
        self._policy = GroupPolicy(allow_terminate, asks(attach, "stepTogether"),
                                   asks(attach, "pauseTogether"))
        self._key = parents.add(client.peer_host, client.say_now, client.send_event)
        self._bound: dict[str, _Bound] = {}  # by process id
        self._running: dict[str, Process] = {}  # running live processes shown, by id
        self._activity_asked: set[str] = set()  # ids asked what they run (_ask_what_runs_now)
        self._reported_at: dict[str, float] = {}  # (loop time) a running one's last report
        self._tasks: set[asyncio.Task[None]] = set()
        self._disconnected = asyncio.Event()  # the client's disconnect was answered
        # The sessions each bound process had when the client's disconnect went out: those
        # its debugger resumed (a stop after it is a new session, for the next client).
        self._resumed_by_disconnect: dict[str, set[str]] = {}
        self._setting_up = asyncio.Semaphore(SET_UP_CONCURRENCY)
        self._flushing: asyncio.TimerHandle | None = None  # the policy's held output's timer
        # The group's kept snapshots, shown as read-only threads only when the attach asks.
        self._store = snapshots if wants_snapshots(attach) else None
        self._snapshots = GroupSnapshots(self._policy)

    async def run(self) -> None:
        """Serve the group session (see the module docstring); always lets every process go."""
        self.carry_out([HubAnswers(self._attach)])
        reading = asyncio.ensure_future(self._read_client())
        disconnected = asyncio.ensure_future(self._disconnected.wait())
        unfollow = self._parents.follow(self._bring_breakpoints_up)
        try:
            await asyncio.wait({reading, disconnected}, return_when=asyncio.FIRST_COMPLETED)
            if reading.done():
                reading.result()  # re-raise a protocol error
        finally:
            unfollow()
            if self._flushing is not None:
                self._flushing.cancel()
            for waiting in (reading, disconnected):
                waiting.cancel()
            await asyncio.gather(reading, disconnected, return_exceptions=True)
            for task in self._tasks:
                task.cancel()
            await asyncio.gather(*self._tasks, return_exceptions=True)
            self._parents.remove(self._key)
            for bound in list(self._bound.values()):
                await self._let_go(bound)
            await self._client.drain_quietly()

    async def _read_client(self) -> None:
        while True:
            try:
                message = await self._client.next_client_message()
            except PeerClosed:
                return
            if isinstance(message, Request) and message.command == "disconnect":
                self._resumed_by_disconnect = {key: set(bound.process.sessions)
                                               for key, bound in self._bound.items()}
            self.carry_out(self._policy.from_client(message))

    def carry_out(self, actions: list[Action]) -> None:
        """Do what the policy decided, in order (writes only: nothing here waits)."""
        for action in actions:
            if isinstance(action, ToClient):
                self._client.send(action.message)  # renumbered on the client's connection
                if (isinstance(action.message, Response)
                        and action.message.command == "disconnect"):
                    self._disconnected.set()
            elif isinstance(action, ToProcess) and action.key in self._snapshots:
                self.carry_out(self._snapshots.send(action.key, action.message,
                                                    asyncio.get_running_loop().time()))
            elif isinstance(action, ToProcess):
                bound = self._bound.get(action.key)
                if bound is not None and bound.debugger is not None:
                    bound.debugger.send(action.message)
            elif isinstance(action, PauseProcess):
                bound = self._bound.get(action.key)
                if bound is not None:
                    bound.process.send(Pause(request_id=0, expire_ms=action.expire_ms,
                                             by_client=True))
            elif isinstance(action, ProcessReady):
                bound = self._bound.get(action.key)
                if bound is not None:
                    bound.process.send(ClientReady(channel=bound.data_id))
            elif isinstance(action, AskThreads):
                self._start(self._ask_threads(action.keys), "group-threads")
            elif isinstance(action, PauseRunning):
                self._start(self._pause_running(action.key), "group-pause")
            else:
                self._answer(action.request)

    # -- the session's own requests -----------------------------------------------------------

    def _answer(self, request: Request) -> None:
        """Answer one request of the session itself, once (:class:`HubAnswers`)."""
        command = request.command
        if command == "initialize":
            self._client.respond(request, adapter_capabilities(self._allow_terminate))
        elif command == "attach":
            self._client.respond(request)
            self._client.send_event(Event(seq=0, event="initialized"))
        elif command == "configurationDone":
            self._client.respond(request)
            if not any(task.get_name() == "group-joining" for task in self._tasks):
                self._start(self._join_paused(), "group-joining")
                if self._store is not None:
                    self._start(self._join_snapshots(self._store), "group-snapshots")
        elif command == "terminate":
            # Ends the group session only, as a cluster session's; the client then disconnects.
            self._client.respond(request)
            self._client.send_event(Event(seq=0, event="terminated"))
        else:
            self._parents.answer_edit(self._client, self._key, request,
                                      local_root_of(self._attach))

    # -- processes joining and leaving ----------------------------------------------------------

    def _start(self, coroutine: Coroutine[Any, Any, None], name: str) -> None:
        task = asyncio.ensure_future(coroutine)
        task.set_name(name)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def _in_group(self, process: Process) -> bool:
        if self._selector is None:
            return True
        view = self._registry.process_view(process)
        view["labels"] = labels_of(process)  # a process that is not live: its sessions'
        return self._selector.matches(view)

    def _wanted(self, session: HubSession) -> bool:
        if session.state is not SessionState.WAITING or session.process.id in self._bound:
            return False
        return self._in_group(session.process)

    async def _join_paused(self) -> None:
        """Join every paused process of the group, now and as they pause; show every
        running live process of it; say once when the group has no process yet."""
        first_look = True  # only it says the group has no process yet (not: no longer)
        while True:
            await self._ask_what_runs_now()
            for session in self._registry.all_sessions():
                if self._wanted(session):
                    try:
                        await self._registry.attach(session, self)
                    except (SessionBusyError, SessionNotFoundError):
                        continue  # another client's, or gone: not in the group session
                    bound = self._bound[session.process.id] = _Bound(session.process)
                    bound.on_lost = self._lost_callback(bound)
                    session.process.on_lost.append(bound.on_lost)
                    self._start(self._serve(bound, session), f"group-{session.process.id}")
            self._show_running()
            if first_look and not self._bound and not self._running:
                which = (f"matches {self._selector.text}" if self._selector is not None
                         else "is linked or paused")
                self._client.say_now(f"raydebug: no process {which} yet; each joins this "
                                     "session as it links (running) or pauses")
            first_look = False
            await self._registry.wait_for_change()

    async def _ask_what_runs_now(self) -> None:
        """A selector on what runs now (``task=``, ``actor=``) asks each process what it runs
        before it is first matched, as ``ps`` and ``pause`` do: the hub's last answer may
        predate the task, or (a worker that linked after its task began) there is none,
        and the group said it had no process while its tasks ran. Asked once per process:
        one that starts such a task later joins when it pauses."""
        if self._queries is None or self._selector is None \
                or not self._selector.needs_activity:
            return
        fresh = [process for process in self._registry.all_processes()
                 if process.id not in self._activity_asked]
        if fresh:
            self._activity_asked.update(process.id for process in fresh)
            await self._queries.refresh_activity(fresh, everyone=True)

    async def _join_snapshots(self, store: SnapshotStore) -> None:
        """Join the group's newest :data:`KEPT_OFFERED` kept snapshots, then each one kept
        later (:mod:`raydebug.protocol.group_snapshots`)."""
        version = -1
        while True:
            if store.version != version:
                version = store.version
                mine = [snapshot for snapshot in store.all() if self._selector is None
                        or self._selector.matches(dict(snapshot.process))]
                self.carry_out(self._snapshots.join(
                    mine[-KEPT_OFFERED:], self._initialize, self._attach.arguments))
            await store.wait_for_version_after(version)

    def _show_running(self) -> None:
        """The group's running live processes (no client, no thread paused) are shown as
        running threads; one that pauses, exits or is taken by another client no longer."""
        if self._queries is None:
            return
        now = set()
        asking: list[str] = []  # new ones' threads, asked in one round (a job's 1,000 at once)
        for process in self._registry.all_processes():
            if (process.live and process.state is ProcessState.RUNNING and process.client is None
                    and process.id not in self._bound and self._in_group(process)):
                now.add(process.id)
                if process.id not in self._running:
                    self._running[process.id] = process
                    actions = self._policy.runs(member_of(process))
                    asking += [key for action in actions if isinstance(action, AskThreads)
                               for key in action.keys]
                    self.carry_out([a for a in actions if not isinstance(a, AskThreads)])
        if asking:
            self.carry_out([AskThreads(tuple(asking))])
        for key in [key for key in self._running if key not in now]:
            del self._running[key]
            self._reported_at.pop(key, None)
            self.carry_out(self._policy.not_running(key))

    async def _ask_threads(self, keys: tuple[str, ...]) -> None:
        """Ask running processes ``keys`` their threads (their stacks), under one bound.
        Each key's report (or None) reaches the policy whatever happens: a ``threads``
        request waits for it."""
        loop = asyncio.get_running_loop()
        processes = [self._running[key] for key in keys if key in self._running and
                     loop.time() - self._reported_at.get(key, -RUNNING_THREADS_FRESH)
                     >= RUNNING_THREADS_FRESH]  # the others' last report stands
        reports: dict[str, list[Any] | None] = {}
        try:
            if processes and self._queries is not None:
                stacks = await self._queries.stacks(processes, with_locals=False,
                                                    timeout=RUNNING_THREADS_TIMEOUT)
                for process, entry in zip(processes, stacks, strict=True):
                    if entry["answered"]:
                        reports[process.id] = entry["threads"]
                        self._reported_at[process.id] = loop.time()
        except Exception as error:  # our own bug: reported, and the request still answered
            log.exception("group session: asking running processes' threads: %s", error)
        for key in keys:
            self.carry_out(self._policy.running_threads(key, reports.get(key)))

    async def _pause_running(self, key: str) -> None:
        """Pause running process ``key`` as ``raydebug pause`` does; its stops join the
        group as any pause's. A failure is said on the client's console."""
        process = self._running.get(key)
        if process is None or self._queries is None:
            return
        try:
            result = await self._queries.pause([process], expire=CLIENT_PAUSE_WAIT)
        except Exception as error:  # our own bug: reported, said, contained
            log.exception("group session: pausing pid %s: %s", process.record.pid, error)
            result = {"failed": {process.id: f"raydebug could not ask it: {error}"}}
        for reason in result["failed"].values():
            self._client.say_now(f"raydebug: pid {process.record.pid} did not pause: {reason}")

    def _bring_breakpoints_up(self) -> None:
        """The cluster's breakpoint set changed: each joined process's debugger gets it."""
        for bound in list(self._bound.values()):
            if bound.breakpoints is not None:
                self.carry_out(self._policy.configure(
                    bound.process.id, bound.breakpoints.bring_up_to(self._parents.cluster)))

    def _lost_callback(self, bound: _Bound) -> Callable[[], None]:
        def lost() -> None:
            self._data_connections.fail(bound.data_id, "the process has ended")
            if bound.debugger is not None:
                bound.debugger.close()
        return lost

    async def _serve(self, bound: _Bound, session: HubSession) -> None:
        """Open ``bound``'s data connection, join it, and pass on what its debugger says
        until the connection ends; then it leaves."""
        process = bound.process
        try:
            async with self._setting_up:
                bound.data_id, future = self._data_connections.expect()
                process.send(OpenDataConnection(channel=bound.data_id))
                try:
                    bound.debugger = DataStream(await asyncio.wait_for(future, SET_UP_TIMEOUT))
                finally:
                    self._data_connections.forget(bound.data_id)
        except (RaydebugError, TimeoutError, OSError) as error:
            log.warning("group session: cannot reach session %s (pid %s): %s",
                        session.record.id, session.record.pid, str(error) or type(error))
            self._client.say_now(f"raydebug: pid {session.record.pid} left out of the group "
                                 f"session: {error or type(error).__name__}")
            await self._let_go(bound)
            return
        bound.breakpoints = DapSessionBreakpoints(session.record.remote_root)
        self.carry_out(self._policy.join(
            member_of(process), self._initialize, self._attach.arguments,
            bound.breakpoints.bring_up_to(self._parents.cluster),
            PathTranslator.for_attach(self._attach.arguments, session.record.remote_root)))
        try:
            await bound.debugger.relay(self._from_process(process.id), self._client.backed_up,
                                       self._client.drain)
        except (RaydebugError, OSError) as error:
            log.warning("group session: pid %s: %s", session.record.pid, error)
        self.carry_out(self._policy.left(process.id))
        await self._let_go(bound)

    def _from_process(self, key: str) -> Callable[[bytes], None]:
        def take(body: bytes) -> None:
            loop = asyncio.get_running_loop()
            self.carry_out(self._policy.from_process(key, body, loop.time()))
            self._flush_at_deadline()
        return take

    def _flush_at_deadline(self) -> None:
        """An unfinished output line is held by the policy (a process wrote no newline
        yet): it is sent as it is when its wait is over, unless its line ends first."""
        deadline = self._policy.output_deadline()
        if deadline is None or self._flushing is not None:
            return

        def flush() -> None:
            self._flushing = None
            self.carry_out(self._policy.flush_partial(asyncio.get_running_loop().time()))
            self._flush_at_deadline()
        self._flushing = asyncio.get_running_loop().call_at(deadline, flush)

    async def _let_go(self, bound: _Bound) -> None:
        """Unbind a process: its agent is told the client has gone, its data connection is
        handed back, and after the client's ``disconnect`` the sessions it resumed end."""
        if self._bound.get(bound.process.id) is not bound:
            return
        del self._bound[bound.process.id]
        process = bound.process
        if bound.on_lost in process.on_lost:
            process.on_lost.remove(bound.on_lost)
        if bound.data_id:
            # Also when the set-up failed: the agent may have handed the data connection to
            # pydevd already, and the process would stay traced for nobody.
            process.send(ClientGone(channel=bound.data_id))
        await self._registry.detach(process, self)
        if self._disconnected.is_set():
            for session_id in self._resumed_by_disconnect.get(process.id, set()):
                await self._registry.end_session(process, session_id)
        if bound.debugger is not None:
            bound.debugger.finish()
