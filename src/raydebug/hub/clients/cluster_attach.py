"""The cluster attach: one IDE attach that shows every paused process as a child session.

Theory of operation (DAP specification, "StartDebugging Request"). A client that attaches
without choosing a session, and whose ``initialize`` said ``supportsStartDebuggingRequest``,
gets a *parent* session served by the hub itself. For each paused process, now and later,
the hub sends the reverse request ``startDebugging{request: "attach", configuration}``; the
configuration is the client's own attach arguments (so the child connects back through the
same host, port and tunnel) plus ``"raydebug": {"session": id, "parent": key}``. The client
opens a new connection with it, which the hub routes like any other attach.

One child per process at a time: pydevd serves one client per process, and that client
sees all its paused threads. Breakpoints the user sets on the parent are kept here and sent
to each child's pydevd right after its attach. They are also the cluster's breakpoints
(:mod:`.cluster_breakpoints`): pushed to every linked process, which arms them without
pydevd and pauses as a session when one is hit; a logpoint's text comes back as an
``output`` event on every parent, prefixed with the process. The parent has no threads of its own;
``terminate`` (then ``disconnect``) on it ends the parent only, and no worker is killed.

Children and the per-address connection limit. Every child connection comes from the IDE's
address. A child counts toward the limit only until its attach is accepted (then it is
bound to its process: see :class:`raydebug.hub.net.PeerLimit`), and the parent offers at
most :data:`OFFER_WINDOW` children at a time that have not attached yet, so a cluster of any
size never holds more than that many counted connections. When the hub refuses one of this
address's connections anyway, the parent's debug console says so (:meth:`ClusterAttaches.tell`).

The client connection starts a cluster attach and hands it the client as a
:class:`.peer.ClientPeer`: this module does not know the connection's class.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ...protocol import Event, Request
from ...protocol.control import ArmBreakpoints, LogpointOutput
from ...session import SessionState
from .. import cluster_breakpoints
from ..registry import HubSession, Registry
from .peer import ClientPeer

# Requests whose arguments the parent keeps and replays to every child.
BREAKPOINT_REQUESTS = ("setBreakpoints", "setFunctionBreakpoints", "setExceptionBreakpoints")
# Children offered and not attached yet, at most; an offer the client has not taken within
# OFFER_TIMEOUT seconds stops holding its place (it is not offered again while it waits).
OFFER_WINDOW = 16
OFFER_TIMEOUT = 10.0
# A session whose child attached and left it paused (the attach failed, the connection
# dropped) is offered again, this many times in all.
OFFER_TRIES = 3
TELL_INTERVAL = 5.0
KEPT_LINES = 1000  # logpoint lines the hub keeps for `raydebug logs`
TERMINAL = "terminal"  # the cluster breakpoints' client that `raydebug break` speaks for
WEB_PAGE = "web page"  # and the one the web page's gutter speaks for


@dataclass
class ClusterBreakpoints:
    """The breakpoint requests a parent received, latest per source (or per kind)."""

    by_key: dict[str, Request] = field(default_factory=dict)

    def remember(self, request: Request) -> None:
        source = request.arguments.get("source") or {}
        key = f"{request.command}:{source.get('path') or source.get('name') or ''}"
        self.by_key[key] = request

    def requests(self) -> list[Request]:
        return list(self.by_key.values())


@dataclass
class _LiveClusterAttach:
    breakpoints: ClusterBreakpoints
    host: str | None  # the client's address
    say: Callable[[str], None]  # a line on the parent's debug console
    send_event: Callable[[Event], None] = lambda event: None
    told_at: float = float("-inf")
    untold: int = 0  # refusals not said, to keep a flood out of the console

    def tell(self, text: str) -> None:
        now = time.monotonic()
        if now - self.told_at < TELL_INTERVAL:
            self.untold += 1
            return
        more = f" (and {self.untold} more since the last such message)" if self.untold else ""
        self.say(text + more)
        self.told_at, self.untold = now, 0


class ClusterAttaches:
    """Live parents by key, so a child connection can find its parent's breakpoints, and
    the hub can tell the user about refused connections in the parent's debug console.

    Also the cluster's breakpoint set (``cluster``), which ``push(wire)`` sends to every
    linked process each time it changes (the hub's; by default nobody is told)."""

    def __init__(self, push: Callable[[dict[str, Any]], None] | None = None) -> None:
        self._parents: dict[str, _LiveClusterAttach] = {}
        self.cluster = cluster_breakpoints.ClusterBreakpointSet()
        self._push = push or (lambda wire: None)
        # The last logpoint lines, numbered, for `raydebug logs` (GET /api/logpoints).
        self._lines: collections.deque[tuple[int, str]] = collections.deque(maxlen=KEPT_LINES)
        self._line_count = 0
        self._new_line = asyncio.Event()
        # Counts every change of the breakpoint set and of what is verified: a listing says
        # which version it shows, and a long-poll waits for a later one.
        self.version = 0
        self._new_version = asyncio.Event()

    def add(self, host: str | None, say: Callable[[str], None],
            send_event: Callable[[Event], None] | None = None
            ) -> tuple[str, ClusterBreakpoints]:
        """Register a parent of a client at ``host``; return its key and its breakpoints."""
        key = secrets.token_hex(8)
        self._parents[key] = _LiveClusterAttach(ClusterBreakpoints(), host, say)
        if send_event is not None:
            self._parents[key].send_event = send_event
        return key, self._parents[key].breakpoints

    def remove(self, key: str) -> None:
        """A parent ended: its breakpoints leave the cluster's set."""
        self._parents.pop(key, None)
        if self.cluster.clear(key):
            self.changed()

    # -- the cluster's breakpoints ------------------------------------------------------------

    def changed(self) -> None:
        """The cluster's set changed: every linked process gets it."""
        self._next_version()
        self._push(self.cluster.wire())

    async def wait_for_version_after(self, version: int) -> None:
        """Return once the set or what is verified changed after ``version`` (at once if
        it already did); the caller bounds the wait."""
        while self.version <= version:
            await self._new_version.wait()

    def _next_version(self) -> None:
        self.version += 1
        self._new_version.set()
        self._new_version = asyncio.Event()

    def arm_message(self) -> ArmBreakpoints:
        """What a process that just identified itself is sent first: the cluster's
        breakpoints, an empty set when there are none. The process registers once it has
        armed them, so that a process listed as live has them."""
        return ArmBreakpoints(breakpoints=self.cluster.wire())

    def loaded(self, paths: list[str]) -> None:
        """A process has code of these client paths loaded: their breakpoints are verified."""
        verified = self.cluster.loaded(paths)
        if verified:
            self._next_version()
        for key, views in verified.items():
            parent = self._parents.get(key)
            if parent is None:
                continue  # raydebug break's own breakpoints: nobody to tell
            for view in views:
                parent.send_event(Event(seq=0, event="breakpoint", body={
                    "reason": "changed", "breakpoint": view}))

    def breakpoints_view(self) -> dict[str, Any]:
        """``GET /api/breakpoints``: every line breakpoint of the cluster, whoever set it."""
        return {"breakpoints": self.cluster.listing()}

    def set_from_terminal(self, body: Any) -> dict[str, Any]:
        """``POST /api/breakpoints`` (``raydebug break``): ``{"path", "line", "condition"?,
        "hitCondition"?, "logMessage"?, "localRoot"?}`` adds one (replacing one on the same
        line), ``{"clear": true}`` removes the terminal's own (an IDE's stay: the IDE owns
        them, and so do the web page's), and the web page's gutter sends a file's whole set
        as DAP's ``setBreakpoints`` arguments: ``{"source": {"path"}, "breakpoints": [...]}``.
        ``{"remove": {"path", "line"}}`` removes the terminal's or the web page's breakpoint
        on that line (the answer's ``removed``: ``[]`` when there was none of theirs).
        Raises ValueError for any other body."""
        if not isinstance(body, dict):
            raise ValueError('the body must be {"path": FILE, "line": N, ...}, '
                             '{"remove": {"path": FILE, "line": N}} or {"clear": true}')
        if body.get("clear") is True:
            cleared = [self.cluster.clear(owner) for owner in (TERMINAL, WEB_PAGE)]
            if any(cleared):
                self.changed()
            return self.breakpoints_view()
        if isinstance(body.get("source"), dict):
            answer = self.cluster.set_breakpoints(WEB_PAGE, body)
            self.changed()
            return {**self.breakpoints_view(), "set": answer.get("breakpoints", [])}
        if "remove" in body:
            removed = self.cluster.remove_line((TERMINAL, WEB_PAGE), *_path_and_line(
                body["remove"]))
            if removed:
                self.changed()
            return {**self.breakpoints_view(), "removed": removed}
        path, line = _path_and_line(body)
        spec = {"line": line, **{key: body[key] for key in ("condition", "hitCondition",
                                                             "logMessage")
                                 if isinstance(body.get(key), str) and body[key]}}
        kept = [b for b in self.cluster.sources_of(TERMINAL).get(path, []) if b["line"] != line]
        root = body.get("localRoot")
        self.cluster.set_breakpoints(TERMINAL, {"source": {"path": path},
                                                "breakpoints": [*kept, spec]},
                                     root if isinstance(root, str) and root else None)
        self.changed()
        return self.breakpoints_view()

    async def wait_logpoint_lines(self, after: int, timeout: float) -> dict[str, Any]:
        """``{"lines": [[n, text], ...], "last": n}``: the kept lines numbered after ``after``,
        waiting up to ``timeout`` seconds for one when there is none yet."""
        if self._line_count <= after and timeout > 0:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._new_line.wait(), timeout)
        return {"lines": [[n, text] for n, text in self._lines if n > after],
                "last": self._line_count}

    def logpoint(self, process: dict[str, Any], output: LogpointOutput) -> None:
        """A logpoint's text from ``process`` (its record, named as :func:`process_prefix`
        says): an ``output`` event on every parent's debug console."""
        who = process_prefix(process)
        body: dict[str, Any] = {"category": "console", "output": f"[{who}] {output.text}\n"}
        self._line_count += 1
        self._lines.append((self._line_count, body["output"]))
        self._new_line.set()
        self._new_line = asyncio.Event()
        if output.path and output.line:
            body.update(source={"path": output.path}, line=output.line)
        for parent in self._parents.values():
            parent.send_event(Event(seq=0, event="output", body=body))

    def is_live(self, key: object) -> bool:
        return isinstance(key, str) and key in self._parents

    def breakpoints_for(self, key: object) -> list[Request]:
        parent = self._parents.get(str(key)) if key else None
        return parent.breakpoints.requests() if parent is not None else []

    def tell(self, host: str | None, text: str) -> None:
        """Say ``text`` in the debug console of every parent whose client is at ``host``, at
        most once per :data:`TELL_INTERVAL` seconds (then with how many were not said)."""
        for parent in self._parents.values():
            if parent.host == host:
                parent.tell(text)


def _path_and_line(where: Any) -> tuple[str, int]:
    """``{"path": "/abs/job.py", "line": 12}`` -> its two fields; raises ValueError."""
    path, line = (where.get("path"), where.get("line")) if isinstance(where, dict) else (0, 0)
    if not isinstance(path, str) or not path.startswith("/") \
            or not isinstance(line, int) or isinstance(line, bool) or line < 1:
        raise ValueError("a breakpoint needs an absolute path and a line number >= 1")
    return path, line


def process_prefix(view: dict[str, Any]) -> str:
    """``task, rank 3, pid 123`` for a process record (``Registry.process_view``)."""
    labels = view.get("labels") or {}
    rank = labels.get("RANK", labels.get("rank"))
    parts = [str(view["task_name"])] if view.get("task_name") else []
    if rank is not None:
        parts.append(f"rank {rank}")
    parts.append(f"pid {view.get('pid')}")
    return ", ".join(parts)


def child_name(session: HubSession) -> str:
    """``task (node, pid)``, ``Actor.method (node, pid)``, or ``file:line (host, pid)``."""
    record = session.record
    where = record.node_ip or record.host
    label = record.task_name or f"{record.file.rsplit('/', 1)[-1]}:{record.line}"
    if record.reason == "exception" and record.exception:
        label += f" [{record.exception.split(':', 1)[0]}]"
    return f"{label} ({where}, pid {record.pid})"


class ClusterAttach:
    """Serves the parent side of a cluster attach on an existing client connection."""

    def __init__(self, client: ClientPeer, registry: Registry, parents: ClusterAttaches,
                 attach: Request) -> None:
        self._client = client
        self._registry = registry
        self._parents = parents
        self._attach = attach
        self._key, self._breakpoints = parents.add(client.peer_host, client.say_now,
                                                   client.send_event)
        settings = attach.arguments.get("raydebug")
        root = settings.get("localRoot") if isinstance(settings, dict) else None
        self._local_root = root if isinstance(root, str) and root else None
        self._offered: dict[str, _Offer] = {}  # by process id: the last offer to the client

    async def run(self) -> None:
        """Answer the parent's requests and offer children until the client leaves."""
        client = self._client
        client.respond(self._attach)
        client.send_event(Event(seq=0, event="initialized"))
        offering = asyncio.ensure_future(self._offer_children())
        try:
            while True:
                message = await client.next_client_message()
                if isinstance(message, Request):
                    if not self._answer(message):
                        return
        finally:
            offering.cancel()
            await asyncio.gather(offering, return_exceptions=True)
            self._parents.remove(self._key)

    def _answer(self, request: Request) -> bool:
        """Answer one request on the parent; False when the parent should end."""
        client = self._client
        if request.command in BREAKPOINT_REQUESTS:
            try:
                body = self._set_cluster_breakpoints(request)
            except ValueError as error:
                client.fail(request, str(error))
                return True
            self._breakpoints.remember(request)  # for each child's pydevd, as it attaches
            client.respond(request, body)
            self._parents.changed()
        elif request.command == "threads":
            client.respond(request, {"threads": []})
        elif request.command == "terminate":
            # Ends the parent only: children, and their workers, go on. DAP: the client
            # then sends disconnect.
            client.respond(request)
            client.send_event(Event(seq=0, event="terminated"))
        elif request.command == "disconnect":
            client.respond(request)
            return False
        elif request.command in ("configurationDone", "pause", "continue"):
            client.respond(request)
        else:
            client.fail(request, f"{request.command!r}: this is the cluster session; select "
                                 "one of its child sessions")
        return True

    def _set_cluster_breakpoints(self, request: Request) -> dict[str, Any]:
        """The response body; raises ValueError for arguments that name no file or line."""
        cluster = self._parents.cluster
        if request.command == "setBreakpoints":
            return cluster.set_breakpoints(self._key, request.arguments, self._local_root)
        if request.command == "setFunctionBreakpoints":
            return cluster.set_function_breakpoints(self._key, request.arguments)
        return cluster.set_exception_breakpoints(self._key, request.arguments)

    async def _offer_children(self) -> None:
        """Send startDebugging for every paused process not yet offered, as they come, at
        most :data:`OFFER_WINDOW` on their way at once."""
        while True:
            now = time.monotonic()
            on_their_way = sum(1 for offer in self._offered.values()
                               if offer.on_its_way(now))
            for session in self._registry.all_sessions():
                if on_their_way >= OFFER_WINDOW:
                    break
                if self._maybe_offer(session, now):
                    on_their_way += 1
            # An offer that times out frees its place without any change in the registry.
            expiries = [offer.at + OFFER_TIMEOUT - now for offer in self._offered.values()
                        if offer.on_its_way(now)]
            try:
                await asyncio.wait_for(self._registry.wait_for_change(),
                                       max(min(expiries), 0.01) if expiries else None)
            except TimeoutError:
                pass

    def _maybe_offer(self, session: HubSession, now: float) -> bool:
        """Offer ``session`` unless its process has a child on its way or attached; True
        when offered. A child that attached and then left without resuming the process
        (its attach failed, or its connection dropped) is offered again."""
        if session.state is not SessionState.WAITING:
            return False
        process = session.process
        offered = self._offered.get(process.id)
        tries = 1
        if offered is not None and offered.session.record.id in process.sessions:
            if not offered.left() or offered.tries >= OFFER_TRIES:
                return False  # its child is on its way (or was, and never came), or gave up
            tries = offered.tries + 1
        self._offered[process.id] = _Offer(session, now, session.attaches, tries)
        configuration = {
            **self._attach.arguments,
            "request": "attach",
            "name": child_name(session),
            # The client's own raydebug settings (its token) go to the child too.
            "raydebug": {**(self._attach.arguments.get("raydebug") or {}),
                         "session": session.record.id, "parent": self._key},
        }
        self._client.send_request(Request(seq=0, command="startDebugging", arguments={
            "request": "attach", "configuration": configuration}))
        return True


@dataclass
class _Offer:
    """A startDebugging sent for ``session``, at ``at`` (monotonic seconds), when it had
    had ``attaches`` clients."""

    session: HubSession
    at: float
    attaches: int
    tries: int  # offers of this session so far, this one included

    def on_its_way(self, now: float) -> bool:
        """Offered, no client attached since, and not given up on."""
        return (self.session.attaches == self.attaches
                and self.session.state is SessionState.WAITING
                and now - self.at < OFFER_TIMEOUT)

    def left(self) -> bool:
        """A client attached since the offer, and the session is waiting again."""
        return (self.session.attaches > self.attaches
                and self.session.state is SessionState.WAITING)
