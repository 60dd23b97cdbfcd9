"""The hub's cluster sessions, and the one breakpoint set they share with every client.

Theory of operation. :class:`ClusterSessions` holds the live cluster sessions by key (each
served by a :class:`.cluster_attach.ClusterAttach`), so that a child connection can tell it
belongs to one and the hub can tell a user, in their parent's debug console, about refused
connections (:meth:`ClusterSessions.tell`). It owns the hub's breakpoint set
(:mod:`raydebug.hub.cluster_breakpoints`) and is the only way it changes: a cluster
session's breakpoint requests (:meth:`ClusterSessions.edit`), ``raydebug break`` and the web
page (:meth:`ClusterSessions.set_from_terminal`), a parent
that leaves. After each change every linked process is sent the set (``push``) and every
follower is called (an attached child session, which brings its pydevd up to the set:
:meth:`ClusterSessions.follow`). It also keeps the last logpoint lines for ``raydebug logs``.
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
from .. import cluster_breakpoints
from .peer import ClientPeer

# The requests that edit a cluster session's breakpoints in the breakpoint set.
BREAKPOINT_REQUESTS = ("setBreakpoints", "setFunctionBreakpoints", "setExceptionBreakpoints")
TELL_INTERVAL = 5.0
KEPT_LINES = 1000  # logpoint lines the hub keeps for `raydebug logs`


@dataclass
class _LiveParent:
    host: str | None  # the client's address
    say: Callable[[str], None]  # a line on the parent's debug console
    send_event: Callable[[Event], None] = lambda event: None
    told_at: float = float("-inf")
    untold: int = 0  # refusals not said, to keep a flood out of the console
    # The snapshots its children attached to (their offers taken), and an event set (then
    # replaced) at each.
    children: set[str] = field(default_factory=set)
    child_came: asyncio.Event = field(default_factory=asyncio.Event)

    def tell(self, text: str) -> None:
        now = time.monotonic()
        if now - self.told_at < TELL_INTERVAL:
            self.untold += 1
            return
        more = f" (and {self.untold} more since the last such message)" if self.untold else ""
        self.say(text + more)
        self.told_at, self.untold = now, 0


class ClusterSessions:
    """Live parents by key, so a child connection can tell it belongs to one, and the hub
    can tell the user about refused connections in the parent's debug console.

    Also the hub's breakpoint set (``cluster``): ``push(wire)`` sends it to every linked
    process each time it changes (the hub's; by default nobody is told), and each follower
    (an attached child session, :meth:`follow`) is called."""

    def __init__(self, push: Callable[[dict[str, Any]], None] | None = None) -> None:
        self._parents: dict[str, _LiveParent] = {}
        self.cluster = cluster_breakpoints.ClusterBreakpointSet()
        self._push = push or (lambda wire: None)
        self._followers: list[Callable[[], None]] = []
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
            ) -> str:
        """Register a parent of a client at ``host``; return its key."""
        key = secrets.token_hex(8)
        self._parents[key] = _LiveParent(host, say)
        if send_event is not None:
            self._parents[key].send_event = send_event
        return key

    def remove(self, key: str) -> None:
        """A parent ended: its breakpoints leave the cluster's set."""
        self._parents.pop(key, None)
        if self.cluster.clear(key):
            self.changed()

    # -- the cluster's breakpoints ------------------------------------------------------------

    def follow(self, on_change: Callable[[], None]) -> Callable[[], None]:
        """Call ``on_change`` after each change of the set, until the returned function
        is called."""
        self._followers.append(on_change)

        def unfollow() -> None:
            if on_change in self._followers:
                self._followers.remove(on_change)
        return unfollow

    def edit(self, key: str, request: Request, local_root: str | None) -> dict[str, Any]:
        """A breakpoint request (:data:`BREAKPOINT_REQUESTS`) of the cluster session ``key``,
        whose client's code is under ``local_root``: its breakpoints of that kind (and
        source) become the request's; returns the response body. Raises ValueError for
        arguments that name no file or line."""
        cluster = self.cluster
        if request.command == "setBreakpoints":
            body = cluster.set_breakpoints(key, request.arguments, local_root)
        elif request.command == "setFunctionBreakpoints":
            body = cluster.set_function_breakpoints(key, request.arguments)
        else:
            body = cluster.set_exception_breakpoints(key, request.arguments)
        self.changed()
        return body

    def answer_edit(self, client: ClientPeer, key: str, request: Request,
                    local_root: str | None) -> None:
        """:meth:`edit`, and answer ``request`` on ``client``: its body, or the error."""
        try:
            body = self.edit(key, request, local_root)
        except ValueError as error:
            client.fail(request, str(error))
        else:
            client.respond(request, body)

    def changed(self) -> None:
        """The cluster's set changed: every linked process and every follower gets it."""
        self._next_version()
        self._push(self.cluster.wire())
        for on_change in list(self._followers):
            on_change()

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
        Raises ValueError for any other body (see
        :meth:`~raydebug.hub.cluster_breakpoints.ClusterBreakpointSet.edit_over_http`)."""
        answer, changed = self.cluster.edit_over_http(body)
        if changed:
            self.changed()
        return answer

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

    def child_attached(self, key: object, child: str) -> None:
        """A child of the live parent ``key`` attached to ``child`` (a snapshot's id)."""
        parent = self._parents.get(key) if isinstance(key, str) else None
        if parent is not None:
            parent.children.add(child)
            parent.child_came.set()
            parent.child_came = asyncio.Event()

    def attached_children(self, key: str) -> set[str]:
        """What the children of parent ``key`` attached to so far (empty once it left)."""
        parent = self._parents.get(key)
        return set(parent.children) if parent is not None else set()

    async def wait_for_child(self, key: str) -> None:
        """Return when a child of parent ``key`` attaches next (never once it left)."""
        parent = self._parents.get(key)
        await (parent.child_came.wait() if parent is not None else asyncio.Event().wait())

    def tell(self, host: str | None, text: str) -> None:
        """Say ``text`` in the debug console of every parent whose client is at ``host``, at
        most once per :data:`TELL_INTERVAL` seconds (then with how many were not said)."""
        for parent in self._parents.values():
            if parent.host == host:
                parent.tell(text)


def local_root_of(attach: Request) -> str | None:
    """The ``"raydebug": {"localRoot"}`` of an attach: where the client's code is."""
    settings = attach.arguments.get("raydebug")
    root = settings.get("localRoot") if isinstance(settings, dict) else None
    return root if isinstance(root, str) and root else None


def process_prefix(view: dict[str, Any]) -> str:
    """``task, rank 3, pid 123`` for a process record (``Registry.process_view``)."""
    labels = view.get("labels") or {}
    rank = labels.get("RANK", labels.get("rank"))
    parts = [str(view["task_name"])] if view.get("task_name") else []
    if rank is not None:
        parts.append(f"rank {rank}")
    parts.append(f"pid {view.get('pid')}")
    return ", ".join(parts)
