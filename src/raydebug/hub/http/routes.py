"""The hub's HTTP routes: one method per route, named in one table (:meth:`HubRoutes.table`).

Each method is a handler of :mod:`.api`'s route table: it takes the query (and a POST's
JSON body) and returns the payload, or a :class:`.api.Reply`. The listings that a client
waits on (``/api/processes``, ``/api/sessions``, ``/api/breakpoints``, ``/api/snapshots``)
long-poll the same way (:mod:`.long_poll`).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from http import HTTPStatus
from typing import Any

from ... import web
from ...selectors import parse as parse_selector
from ...session import SessionState
from ...stack_tree import merge_stacks
from ..clients.cluster_sessions import ClusterSessions
from ..net import RECV_SIZE
from ..processes import DEFAULT_TIMEOUT, ProcessQueries
from ..registry import Registry
from ..snapshot_store import SnapshotStore
from .api import Reply, Routes
from .exchange import Query
from .login import is_client_token, token_cookie
from .long_poll import LongPoll

# Serve a DAP client on these streams, whose first bytes were read; the token it must
# present in ``attach`` (None: it need not).
ServeDap = Callable[[asyncio.StreamReader, Any, bytes, "str | None"], Awaitable[None]]


class HubRoutes:
    """The hub's routes over its registry, its process queries and its cluster
    breakpoints; ``serve_dap`` serves the page's DAP connection as any client's."""

    def __init__(self, registry: Registry, queries: ProcessQueries,
                 cluster_sessions: ClusterSessions, *, client_token: str | None,
                 statistics: Callable[[], dict[str, Any]], serve_dap: ServeDap,
                 snapshots: SnapshotStore | None = None) -> None:
        self.registry = registry
        self.snapshots = snapshots or SnapshotStore()
        self.queries = queries
        self.cluster_sessions = cluster_sessions
        self.client_token = client_token
        self.statistics = statistics
        self.serve_dap = serve_dap

    def table(self) -> Routes:
        """Every route by its key (see :mod:`.api` for the keys), the page's files too."""
        routes: Routes = {"/api/sessions": self.sessions,
                          "/api/health": self.health,
                          "/api/processes": self.processes,
                          "/api/stacks": self.stacks,
                          "/api/breakpoints": self.breakpoints,
                          "/api/logpoints": self.logpoints,
                          "POST /api/pause": self.pause,
                          "POST /api/continue": self.continue_sessions,
                          "POST /api/breakpoints": self.edit_breakpoints,
                          "/api/snapshots": self.list_snapshots,
                          "/api/snapshot": self.snapshot,
                          "POST /api/snapshots/clear": self.clear_snapshots,
                          "WEBSOCKET /dap": self.dap_websocket}
        routes.update({path: self._page_file(path) for path in web.page_files()})
        return routes

    async def sessions(self, query: Query) -> Reply:
        """Every session (``state=S``: only those), one per line. ``min=N``/``max=N`` with
        ``timeout=S`` wait until that many exist; ``after=VERSION`` waits for a change
        (:mod:`.long_poll`); both within ``timeout``."""
        poll = LongPoll.take(query)
        minimum = int(query.get("min", "0"))
        maximum = int(query["max"]) if "max" in query else None
        state = SessionState(query["state"]) if "state" in query else None
        counted = ((lambda: self.registry.wait_for_count(minimum, maximum, state),)
                   if minimum > 0 or maximum is not None else ())
        version = await poll.wait(self.registry, *counted)
        return Reply(body=self.registry.sessions_json(state), headers=(version,))

    async def health(self, query: Query) -> dict[str, Any]:
        return {"status": "ok", **self.statistics()}

    async def processes(self, query: Query) -> Reply:
        """Every linked process (``?KEY=VALUE`` selector terms filter them); what Ray
        processes run now is asked of them (``now=0``: not; those that do not answer in
        time, or that the bound left unasked, are listed with their last answer,
        ``activity_stale``). ``argv`` is bounded (``argv=1``: whole). Long-polls with
        ``after=VERSION&timeout=S`` (:mod:`.long_poll`): processes or sessions changed."""
        version = await LongPoll.take(query).wait(self.registry)
        started = time.perf_counter()
        self.queries.last_round_writing, self.queries.last_round_asked = 0.0, 0
        now = query.pop("now", "1") != "0"
        full_argv = query.pop("argv", "0") == "1"
        selector = parse_selector(f"{k}={v}" for k, v in query.items())
        # A term on what runs now asks everyone first; other terms pick before asking.
        processes = await self.queries.select(selector, activity=now)
        if now and not selector.needs_activity:
            before = self.registry.version
            await self.queries.refresh_activity(processes)
            if self.registry.version != before:
                # One that (re)linked while the others answered is listed too, as it is
                # now: a child's ``parent`` names it (a CI run read a child whose parent
                # was in no record of the listing).
                processes = await self.queries.select(selector, activity=False)
        asked = time.perf_counter()
        body = self.registry.processes_json(processes, full_argv)
        # Where the hub's time went (a browser's developer tools show it; the bench too).
        timing = (f"ask;dur={(asked - started) * 1000:.1f}, "
                  f"write;dur={self.queries.last_round_writing * 1000:.1f}, "
                  f"encode;dur={(time.perf_counter() - asked) * 1000:.1f}, "
                  f'asked;desc="{self.queries.last_round_asked}"')
        return Reply(body=body, headers=(("Server-Timing", timing), version))

    async def stacks(self, query: Query) -> dict[str, Any]:
        """Every thread's stack of the selected processes (``?KEY=VALUE`` terms,
        ``locals=1``, ``timeout=S``), and the stacks merged into one tree."""
        with_locals = query.pop("locals", "0") not in ("0", "", "false")
        timeout = float(query.pop("timeout", DEFAULT_TIMEOUT))
        selector = parse_selector(f"{k}={v}" for k, v in query.items())
        processes = await self.queries.select(selector)
        if not processes and selector.terms:
            raise self.queries.no_match(selector)
        stacks = await self.queries.stacks(processes, with_locals, timeout)
        return {"processes": stacks, "tree": merge_stacks(stacks).to_dict()}

    async def pause(self, query: Query, body: Any) -> dict[str, Any]:
        """``{"selector": ["rank=1"]}``: pause every matching running process; with
        ``"expire": SECONDS``, a thread not stopped by then is no longer asked; with
        ``"cancel": true``, withdraw the pauses of those processes not met yet."""
        processes = await self._selected(body)
        expire = body.get("expire", 0)
        if not isinstance(expire, (int, float)) or isinstance(expire, bool) or expire < 0:
            raise ValueError('"expire" must be a number of seconds >= 0')
        if body.get("cancel") is True:
            return await self.queries.cancel_pauses(processes)
        return await self.queries.pause(processes, expire=float(expire))

    async def continue_sessions(self, query: Query, body: Any) -> dict[str, Any]:
        """``{"selector": ["rank=1"]}``: every paused thread of the matching processes runs
        on (``raydebug continue``, the page's *Continue all*), but in those a client is
        attached to; see :meth:`.ProcessQueries.resume` for the answer."""
        return await self.queries.resume(await self._selected(body))

    async def _selected(self, body: Any) -> list[Any]:
        """The processes a POST's ``{"selector": [...]}`` matches; raises ``ValueError``
        for another body, :class:`NoProcessMatchError` when none matches."""
        terms = body.get("selector") if isinstance(body, dict) else None
        if not isinstance(terms, list) or not all(isinstance(t, str) for t in terms):
            raise ValueError('the body must be {"selector": ["KEY=VALUE", ...]}')
        selector = parse_selector(terms)
        processes = await self.queries.select(selector)
        if not processes:
            raise self.queries.no_match(selector)
        return processes

    async def logpoints(self, query: Query) -> dict[str, Any]:
        """Logpoint lines numbered after ``after`` (``raydebug logs``); ``timeout`` long-polls."""
        poll = LongPoll.take(query)
        return await self.cluster_sessions.wait_logpoint_lines(poll.after or 0, poll.timeout)

    async def breakpoints(self, query: Query) -> Reply:
        """Every cluster breakpoint (``raydebug break --list``). Long-polls with
        ``after=VERSION&timeout=S`` (:mod:`.long_poll`): a breakpoint set, removed, or
        verified."""
        version = await LongPoll.take(query).wait(self.cluster_sessions)
        return Reply(payload=self.cluster_sessions.breakpoints_view(), headers=(version,))

    async def edit_breakpoints(self, query: Query, body: Any) -> dict[str, Any]:
        """Add a cluster breakpoint, remove one, or clear the terminal's (``raydebug
        break``)."""
        return self.cluster_sessions.set_from_terminal(body)

    async def list_snapshots(self, query: Query) -> Reply:
        """Every snapshot kept (``?KEY=VALUE`` selector terms filter them by their
        process), newest first, one row each (:func:`.snapshot_store.summary`). Long-polls
        with ``after=VERSION&timeout=S`` (:mod:`.long_poll`): a snapshot kept or dropped."""
        version = await LongPoll.take(query).wait(self.snapshots)
        selector = parse_selector(f"{k}={v}" for k, v in query.items())
        rows = [row for row, snapshot in zip(self.snapshots.summaries(),
                                             reversed(self.snapshots.all()), strict=True)
                if selector.matches(snapshot.process)]
        return Reply(payload={"snapshots": rows}, headers=(version,))

    async def snapshot(self, query: Query) -> Reply:
        """``?id=ID``: the whole snapshot (its JSON form); 404 for an id not kept."""
        found = self.snapshots.get(query.get("id", ""))
        if found is None:
            return Reply(status=HTTPStatus.NOT_FOUND,
                         payload={"error": f"no snapshot {query.get('id', '')!r} here: "
                                           "`raydebug list` shows those kept"})
        return Reply(payload=found.to_json())

    async def clear_snapshots(self, query: Query, body: Any) -> dict[str, Any]:
        """``{"selector": [...]}`` (``[]``: all) and/or ``{"ids": [...]}``: drop those
        snapshots (their files too); ``{"removed": [ids]}``."""
        body = body if isinstance(body, dict) else {}
        terms, ids = body.get("selector", []), body.get("ids")
        if not isinstance(terms, list) or not all(isinstance(t, str) for t in terms) or (
                ids is not None and not (isinstance(ids, list)
                                         and all(isinstance(i, str) for i in ids))):
            raise ValueError('the body must be {"selector": ["KEY=VALUE", ...]} '
                             'or {"ids": ["ID", ...]}')
        selector = parse_selector(terms)
        chosen = [snapshot.id for snapshot in self.snapshots.all()
                  if selector.matches(snapshot.process)
                  and (ids is None or snapshot.id in ids)]
        removed = self.snapshots.remove(chosen)
        await self.snapshots.delete(removed)
        return {"removed": removed}

    async def dap_websocket(self, reader: asyncio.StreamReader, writer: Any,
                            token_proven: bool) -> None:
        """The browser's DAP connection: the same client path as a TCP client's. An upgrade
        that presented the client token (its cookie) has proven it: the page's scripts
        cannot read that cookie to put it in ``attach``."""
        first = await reader.read(RECV_SIZE)  # b"" would be the end of the stream
        if first:
            await self.serve_dap(reader, writer, first,
                                 None if token_proven else self.client_token)

    def _page_file(self, path: str) -> Callable[[Query], Awaitable[Reply]]:
        async def page_file(query: Query) -> Reply:
            given = query.get("token")
            if path == "/" and given is not None:
                # The link `raydebug web` prints: keep the token in a cookie, and take it
                # out of the address bar (and the history) with a redirect.
                token = self.client_token
                right = token is not None and is_client_token(given, token)
                cookie = (token_cookie(token),) if token and right else ()
                return Reply(HTTPStatus.SEE_OTHER, body=b"", content_type="text/plain",
                             headers=(("Location", "/"), *cookie))
            body, content_type = web.page_file(path)
            return Reply(body=body, content_type=content_type)
        return page_file
