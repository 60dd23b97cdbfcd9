"""The listings a client waits on long-poll alike: ``/api/processes``, ``/api/sessions`` and
``/api/breakpoints`` name the version they show (``Raydebug-Version``) and, asked with
``after=VERSION&timeout=S``, answer once what they show changed, or at the bound."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable
from typing import Any

from raydebug.hub.clients.cluster_sessions import ClusterSessions
from raydebug.hub.http.api import Reply
from raydebug.hub.http.long_poll import VERSION_HEADER, LongPoll
from raydebug.hub.http.routes import HubRoutes
from raydebug.hub.processes import ProcessQueries
from raydebug.hub.registry import Registry
from raydebug.process_record import ProcessRecord
from raydebug.session import PausedThread

PATH = "/me/job.py"


def make_routes() -> HubRoutes:
    registry = Registry()

    async def serve_dap(*args: Any) -> None:
        raise AssertionError("no DAP client here")

    return HubRoutes(registry, ProcessQueries(registry), ClusterSessions(), client_token=None,
                     statistics=dict, serve_dap=serve_dap)


def version_of(reply: Reply) -> str:
    return dict(reply.headers)[VERSION_HEADER]


def payload_of(reply: Reply) -> Any:
    return json.loads(reply.body) if reply.body is not None else reply.payload


async def still_waiting(answer: Awaitable[Reply]) -> asyncio.Future[Reply]:
    """``answer`` running, after the loop has run everything that was ready."""
    task = asyncio.ensure_future(answer)
    for _ in range(20):
        await asyncio.sleep(0)  # a turn of the loop, not a wait for a condition
    assert not task.done(), "answered before anything changed"
    return task


def test_sessions_long_poll_answers_when_a_session_starts():
    async def scenario() -> None:
        routes = make_routes()
        first = await routes.sessions({})
        assert payload_of(first) == []
        waiting = await still_waiting(routes.sessions({"after": version_of(first),
                                                       "timeout": "30"}))
        process = routes.registry.add_process(ProcessRecord(pid=7, host="elsewhere"), "peer",
                                              lambda message: None)
        await routes.registry.add_session(process, PausedThread(
            id="s1", pid=1, host="h", file="f.py", line=1, function="f", since=1.0))
        answer = await asyncio.wait_for(waiting, 5)
        assert [s["id"] for s in payload_of(answer)] == ["s1"]
        assert int(version_of(answer)) > int(version_of(first))

    asyncio.run(scenario())


def test_sessions_count_wait_and_long_poll_share_one_bound():
    async def scenario() -> None:
        routes = make_routes()
        first = await routes.sessions({})
        answer = await asyncio.wait_for(routes.sessions(
            {"min": "1", "after": version_of(first), "timeout": "0.05"}), 5)
        assert payload_of(answer) == [] and version_of(answer) == version_of(first)

    asyncio.run(scenario())


def test_breakpoints_long_poll_answers_when_one_is_set_and_when_it_is_verified():
    async def scenario() -> None:
        routes = make_routes()
        first = await routes.breakpoints({})
        assert payload_of(first) == {"breakpoints": []}
        waiting = await still_waiting(routes.breakpoints({"after": version_of(first),
                                                          "timeout": "30"}))
        await routes.edit_breakpoints({}, {"path": PATH, "line": 3})
        set_ = await asyncio.wait_for(waiting, 5)
        (listed,) = payload_of(set_)["breakpoints"]
        assert listed["line"] == 3 and not listed["verified"]
        waiting = await still_waiting(routes.breakpoints({"after": version_of(set_),
                                                          "timeout": "30"}))
        routes.cluster_sessions.loaded([PATH])  # a process has the file's code loaded
        verified = await asyncio.wait_for(waiting, 5)
        assert [b["verified"] for b in payload_of(verified)["breakpoints"]] == [True]
        again = await routes.breakpoints({"after": version_of(set_), "timeout": "30"})
        assert version_of(again) == version_of(verified)  # already changed: at once

    asyncio.run(scenario())


def test_processes_long_poll_answers_when_a_process_registers():
    async def scenario() -> None:
        routes = make_routes()
        first = await routes.processes({"now": "0"})
        waiting = await still_waiting(routes.processes({"now": "0", "after": version_of(first),
                                                        "timeout": "30"}))
        process = routes.registry.add_process(ProcessRecord(pid=7, host="elsewhere"), "peer",
                                              lambda message: None)
        await routes.registry.register_process(process, ProcessRecord(pid=7, host="elsewhere"))
        answer = await asyncio.wait_for(waiting, 5)
        assert [p["id"] for p in payload_of(answer)] == [process.id]

    asyncio.run(scenario())


def test_a_long_poll_answers_with_what_there_is_when_its_time_runs_out():
    async def scenario() -> None:
        registry = Registry()
        poll = LongPoll.take({"after": "0", "timeout": "0.05"})
        assert await asyncio.wait_for(poll.wait(registry), 5) == (VERSION_HEADER, "0")
        query = {"after": "3", "timeout": "9999", "rank": "1"}
        assert LongPoll.take(query) == LongPoll(3, 300.0) and query == {"rank": "1"}

    asyncio.run(scenario())
