"""``POST /api/continue`` (``raydebug continue``, the page's *Continue all*), in memory:
which processes are asked to resume, and what the answer says of each session."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from raydebug.errors import NoProcessMatchError
from raydebug.hub.clients.cluster_sessions import ClusterSessions
from raydebug.hub.entries import Process
from raydebug.hub.http.routes import HubRoutes
from raydebug.hub.processes import ATTACHED, ProcessQueries
from raydebug.hub.registry import Registry
from raydebug.process_record import ProcessRecord
from raydebug.protocol.control import ControlMessage, Resume, Resumed
from raydebug.session import PausedThread


class Agent:
    """A process's end of the link: answers ``Resume`` as the agent does, its sessions'
    ends first; ``keeps`` a session it no longer has (it ended meanwhile); ``hangs_up``:
    its connection closes instead of an answer."""

    def __init__(self, hub: Hub, keeps: frozenset[str] = frozenset(),
                 hangs_up: bool = False) -> None:
        self.hub, self.keeps, self.hangs_up = hub, keeps, hangs_up
        self.process: Process | None = None
        self.asked: list[ControlMessage] = []

    def __call__(self, message: ControlMessage | bytes) -> None:
        assert isinstance(message, Resume)
        self.asked.append(message)
        asyncio.get_running_loop().create_task(self._answer(message))

    async def _answer(self, message: Resume) -> None:
        assert self.process is not None
        if self.hangs_up:
            self.hub.queries.lost(self.process)
            return
        ended = [s for s in self.process.sessions if s not in self.keeps]
        for session_id in ended:
            await self.hub.registry.end_session(self.process, session_id)
        self.hub.queries.answer(self.process, Resumed(request_id=message.request_id,
                                                      sessions=ended))


class Hub:
    def __init__(self) -> None:
        self.registry = Registry()
        self.queries = ProcessQueries(self.registry)

        async def serve_dap(*args: Any) -> None:
            raise AssertionError("no DAP client here")

        self.routes = HubRoutes(self.registry, self.queries, ClusterSessions(),
                                client_token=None, statistics=dict, serve_dap=serve_dap)

    async def process(self, rank: int, sessions: int = 1, **agent: Any) -> Agent:
        send = Agent(self, **agent)
        process = self.registry.add_process(ProcessRecord(100 + rank, "node"), "peer", send)
        send.process = process
        await self.registry.register_process(process, ProcessRecord.from_dict(
            {"pid": 100 + rank, "host": "node", "labels": {"RANK": str(rank)}}))
        for n in range(sessions):
            await self.registry.add_session(process, PausedThread(
                id=f"r{rank}s{n}", pid=100 + rank, host="node", file="f.py", line=1,
                function="step", labels={"RANK": str(rank)}))
        return send

    async def continue_(self, *terms: str) -> dict[str, Any]:
        return await self.routes.continue_sessions({}, {"selector": list(terms)})


def reasons(answer: dict[str, Any]) -> dict[str, str]:
    return {s["id"]: s["reason"] for s in answer["not_resumed"]}


def test_the_paused_processes_matched_resume_and_an_attached_one_is_left_to_its_client():
    async def scenario() -> None:
        hub = Hub()
        two_threads = await hub.process(0, sessions=2)
        plain = await hub.process(1)
        running = await hub.process(2, sessions=0)
        attached = await hub.process(3)
        other = await hub.process(9)
        assert attached.process is not None
        await hub.registry.attach(attached.process.sessions["r3s0"], object())

        answer = await hub.continue_("rank=0-3")

        assert [s["id"] for s in answer["resumed"]] == ["r0s0", "r0s1", "r1s0"]
        assert answer["resumed"][0]["pid"] == 100 and answer["resumed"][0]["function"] == "step"
        assert reasons(answer) == {"r3s0": ATTACHED}
        asked = {a.process.record.pid: len(a.asked)  # type: ignore[union-attr]
                 for a in (two_threads, plain, running, attached, other)}
        assert asked == {100: 1, 101: 1, 102: 0, 103: 0, 109: 0}
        assert [s["id"] for s in hub.registry.sessions()] == ["r3s0", "r9s0"]

    asyncio.run(scenario())


def test_a_session_gone_meanwhile_is_said_and_the_others_resume_all_the_same():
    async def scenario() -> None:
        hub = Hub()
        await hub.process(0, sessions=2, keeps=frozenset({"r0s1"}))
        await hub.process(1, hangs_up=True)
        await hub.process(2)

        answer = await hub.continue_("rank=0-2")

        assert [s["id"] for s in answer["resumed"]] == ["r0s0", "r2s0"]
        assert reasons(answer) == {"r0s1": "it ended meanwhile",
                                   "r1s0": "its connection closed"}

    asyncio.run(scenario())


def test_a_selector_that_matches_no_process_or_a_body_without_one_is_refused():
    async def scenario() -> None:
        hub = Hub()
        await hub.process(0)
        with pytest.raises(NoProcessMatchError, match="no process matches rank=5"):
            await hub.continue_("rank=5")
        with pytest.raises(ValueError, match="selector"):
            await hub.routes.continue_sessions({}, {"rank": 5})

    asyncio.run(scenario())
