"""``GET /api/processes`` (``raydebug ps``), in memory: a listing names no process it does
not list."""

from __future__ import annotations

import asyncio
import json
from typing import Any

from raydebug.hub.clients.cluster_sessions import ClusterSessions
from raydebug.hub.entries import Process
from raydebug.hub.http.routes import HubRoutes
from raydebug.hub.processes import ProcessQueries
from raydebug.hub.registry import Registry
from raydebug.process_record import ProcessRecord
from raydebug.protocol.control import CollectStacks, ControlConnection, Stacks


def test_a_parent_that_links_while_the_others_answer_is_listed_with_its_child() -> None:
    """A CI run listed a task's child naming a parent that was in no record: the worker's
    link (re)connected while the listing asked the others what they run."""

    async def scenario() -> None:
        registry = Registry()
        queries = ProcessQueries(registry)

        async def serve_dap(*args: Any) -> None:
            raise AssertionError("no DAP client here")

        routes = HubRoutes(registry, queries, ClusterSessions(), client_token=None,
                           statistics=dict, serve_dap=serve_dap)
        worker: list[Process] = []

        def child_answers(message: Any) -> None:
            stream = ControlConnection()
            stream.receive_data(message)
            question = stream.next_event()
            assert isinstance(question, CollectStacks)

            async def answer() -> None:  # the worker links before the child answers
                worker.append(registry.add_process(ProcessRecord(10, "node"), "worker",
                                                   lambda m: None))
                await registry.register_process(worker[0], ProcessRecord.from_dict(
                    {"pid": 10, "host": "node", "worker_id": "w10"}))
                queries.answer(child, Stacks(request_id=question.request_id, threads=[],
                                             now={}))

            asyncio.get_running_loop().create_task(answer())

        child = registry.add_process(ProcessRecord(11, "node"), "child", child_answers)
        await registry.register_process(child, ProcessRecord.from_dict(
            {"pid": 11, "host": "node", "parent_pid": 10, "worker_id": "w10"}))

        reply = await routes.processes({"now": "1"})

        listed = {p["id"]: p for p in json.loads(reply.body or b"")}
        child_view = next(p for p in listed.values() if p["pid"] == 11)
        assert child_view["parent"] == worker[0].id
        assert worker[0].id in listed, listed

    asyncio.run(scenario())


def test_a_listing_without_changes_lists_what_it_asked() -> None:
    async def scenario() -> None:
        registry = Registry()
        queries = ProcessQueries(registry)
        routes = HubRoutes(registry, queries, ClusterSessions(), client_token=None,
                           statistics=dict, serve_dap=None)  # type: ignore[arg-type]
        process: Process = registry.add_process(ProcessRecord(5, "node"), "p", lambda m: None)
        await registry.register_process(process, ProcessRecord.from_dict(
            {"pid": 5, "host": "node"}))
        reply = await routes.processes({"now": "0"})
        assert [p["pid"] for p in json.loads(reply.body or b"")] == [5]

    asyncio.run(scenario())
