"""The hub's process records and its questions to them, in memory (hub/registry.py,
hub/processes.py): lifecycle, views, parents, and fan-outs that one silent process never
delays."""

from __future__ import annotations

import asyncio
import json
import time

from raydebug.errors import NoProcessMatchError
from raydebug.hub.entries import Process, listed_argv
from raydebug.hub.processes import ASK_CHUNK, ProcessQueries
from raydebug.hub.registry import Registry
from raydebug.process_record import ProcessRecord
from raydebug.protocol.control import (
    CollectStacks,
    ControlConnection,
    ControlMessage,
    Pause,
    Paused,
    Stacks,
)
from raydebug.selectors import parse
from raydebug.session import PausedThread


def record(session_id: str) -> PausedThread:
    return PausedThread(id=session_id, pid=1, host="h", file="f.py", line=1, function="f",
                        reason="pause")


class Answering:
    """A process's send(): answers each question at once (or never, when ``silent``)."""

    def __init__(self, queries: ProcessQueries, silent: bool = False) -> None:
        self.queries = queries
        self.silent = silent
        self.process: Process | None = None
        self.asked: list[ControlMessage] = []

    def __call__(self, message: ControlMessage | bytes) -> None:
        if isinstance(message, bytes):  # encoded once, for many processes
            stream = ControlConnection()
            stream.receive_data(message)
            decoded = stream.next_event()
            assert isinstance(decoded, ControlMessage)
            message = decoded
        self.asked.append(message)
        if self.silent:
            return
        assert self.process is not None
        answer: Stacks | Paused
        if isinstance(message, CollectStacks):
            answer = Stacks(request_id=message.request_id, threads=[{"id": 1, "frames": []}],
                            now={"task_name": "train"})
        else:
            assert isinstance(message, Pause)
            answer = Paused(request_id=message.request_id)
        asyncio.get_running_loop().call_soon(self.queries.answer, self.process, answer)


async def linked(registry: Registry, queries: ProcessQueries, pid: int, rank: str,
                 silent: bool = False, **fields: object) -> Process:
    send = Answering(queries, silent)
    process = registry.add_process(ProcessRecord(pid, "node"), f"peer{pid}", send)
    send.process = process
    await registry.register_process(process, ProcessRecord.from_dict(
        {"pid": pid, "host": "node", "argv": ["x"], "labels": {"RANK": rank}, **fields}))
    return process


def test_a_process_is_paused_while_it_has_sessions_and_gone_when_lost():
    async def scenario() -> None:
        registry = Registry()
        queries = ProcessQueries(registry)
        process = await linked(registry, queries, 10, "0")
        (view,) = registry.processes()
        assert (view["state"], view["sessions"], view["live"]) == ("running", [], True)
        await registry.add_session(process, record("s1"))
        await registry.add_session(process, record("s2"))
        assert registry.processes()[0]["state"] == "paused"
        await registry.end_session(process, "s1")
        assert registry.processes()[0]["state"] == "paused"  # one session left
        await registry.end_session(process, "s2")
        assert registry.processes()[0]["state"] == "running"
        await registry.remove_process(process)
        assert process.state.value == "gone" and registry.processes() == []

    asyncio.run(scenario())


def test_a_child_names_its_linked_parent():
    async def scenario() -> None:
        registry = Registry()
        queries = ProcessQueries(registry)
        parent = await linked(registry, queries, 10, "0")
        await linked(registry, queries, 11, "0", parent_pid=10)
        await linked(registry, queries, 12, "0", parent_pid=99)  # its parent is not linked
        parents = {view["pid"]: view["parent"] for view in registry.processes()}
        assert parents == {10: None, 11: parent.id, 12: None}

    asyncio.run(scenario())


def test_a_silent_process_is_listed_unanswered_and_delays_no_one_beyond_the_timeout():
    async def scenario() -> None:
        registry = Registry()
        queries = ProcessQueries(registry)
        processes = [await linked(registry, queries, 10 + rank, str(rank), silent=rank == 2)
                     for rank in range(4)]
        started = time.monotonic()
        stacks = await queries.stacks(processes, with_locals=False, timeout=0.3)
        took = time.monotonic() - started
        assert 0.25 <= took < 1.0  # one timeout for all, not one each
        answered = {entry["process"]["labels"]["RANK"]: entry["answered"] for entry in stacks}
        assert answered == {"0": True, "1": True, "2": False, "3": True}
        silent = stacks[2]
        assert silent["threads"] == [] and "no answer within 0.3s" in silent["reason"]
        assert stacks[0]["process"]["task_name"] == "train"  # what it runs now, as it answered

    asyncio.run(scenario())


def test_a_lost_process_fails_its_questions_at_once():
    async def scenario() -> None:
        registry = Registry()
        queries = ProcessQueries(registry)
        process = await linked(registry, queries, 10, "0", silent=True)
        asking = asyncio.ensure_future(queries.stacks([process], False, timeout=5))
        await asyncio.sleep(0.01)
        await registry.remove_process(process)
        queries.lost(process)
        (entry,) = await asyncio.wait_for(asking, 1)
        assert entry["answered"] is False and entry["reason"] == "its connection closed"

    asyncio.run(scenario())


def test_pause_asks_running_processes_only_and_selectors_that_match_nothing_say_so():
    async def scenario() -> None:
        registry = Registry()
        queries = ProcessQueries(registry)
        running = await linked(registry, queries, 10, "0")
        paused = await linked(registry, queries, 11, "1")
        await registry.add_session(paused, record("s1"))
        result = await queries.pause([running, paused])
        assert result == {"paused": [running.id], "already_paused": [paused.id],
                          "failed": {}}
        assert await queries.select(parse(["rank=1"])) == [paused]
        assert await queries.select(parse(["task=train"])) == []  # not Ray workers: not asked
        error = queries.no_match(parse(["rank=7"]))
        assert isinstance(error, NoProcessMatchError)
        assert str(error) == "no process matches rank=7"
        assert error.known == [f"{running.id} pid 10 on node running RANK=0",
                               f"{paused.id} pid 11 on node paused RANK=1"]

    asyncio.run(scenario())


def test_a_selector_that_matches_nothing_names_a_ray_worker_by_its_nodes_ip_as_ps_does():
    async def scenario() -> None:
        registry = Registry()
        queries = ProcessQueries(registry)
        worker = await linked(registry, queries, 10, "0", node_ip="192.0.2.2")
        error = queries.no_match(parse(["task=nothing"]))
        assert error.known == [f"{worker.id} pid 10 on 192.0.2.2 running RANK=0"]

    asyncio.run(scenario())


def test_task_selectors_ask_ray_processes_what_they_run_now():
    async def scenario() -> None:
        registry = Registry()
        queries = ProcessQueries(registry)
        worker = await linked(registry, queries, 10, "0", worker_id="w1")
        await linked(registry, queries, 11, "1")
        assert await queries.select(parse(["task=train"])) == [worker]

    asyncio.run(scenario())


def test_a_listing_is_the_views_with_argv_bounded_and_whole_on_request():
    async def scenario() -> None:
        registry = Registry()
        queries = ProcessQueries(registry)
        long_argv = ["python", "-u", "worker.py"] + [f"--flag-{i}={'x' * 40}" for i in range(30)]
        parent = await linked(registry, queries, 10, "0", worker_id="w1", argv=long_argv)
        child = await linked(registry, queries, 11, "1", parent_pid=10)
        await registry.add_session(child, record("s1"))
        await queries.refresh_activity([parent, child])
        listed = json.loads(registry.processes_json([parent, child]))
        whole = json.loads(registry.processes_json([parent, child], full_argv=True))
        for view, bounded, full in zip(registry.processes(), listed, whole, strict=True):
            assert bounded.pop("activity_stale") is False
            assert {**view, "argv": None} == {**bounded, "argv": None}
            assert full["argv"] == view["argv"]
        assert listed[0]["task_name"] == "train" and listed[1]["parent"] == parent.id
        assert listed[1]["sessions"] == ["s1"] and listed[1]["state"] == "paused"
        assert listed[0]["argv"][:3] == ["python", "-u", "worker.py"]
        assert listed[0]["argv"][-1] == "…" and len(" ".join(listed[0]["argv"])) <= 170
        assert listed[1]["argv"] == ["x"]

    asyncio.run(scenario())


def test_listed_argv_keeps_the_first_words_that_fit():
    assert listed_argv(["a", "b"], 10) == ["a", "b"]
    assert listed_argv(["aaaa", "bbbb", "cccc"], 10) == ["aaaa", "bbbb", "…"]
    assert listed_argv(["a" * 20, "b"], 10) == ["a" * 10, "…"]
    assert listed_argv([], 10) == []


def test_a_listing_waits_its_bound_then_lists_late_ones_stale_with_their_last_answer():
    async def scenario() -> None:
        registry = Registry()
        queries = ProcessQueries(registry)
        quick = await linked(registry, queries, 10, "0", worker_id="w0")
        slow = await linked(registry, queries, 11, "1", worker_id="w1")
        await queries.refresh_activity([quick, slow])
        assert slow.now == {"task_name": "train"} and not slow.now_stale
        slow.send.silent = True  # type: ignore[attr-defined]
        started = time.monotonic()
        await queries.refresh_activity([quick, slow], timeout=0.2)
        assert 0.15 < time.monotonic() - started < 1.0  # the bound, not more
        listed = {p["id"]: p for p in json.loads(registry.processes_json([quick, slow]))}
        assert listed[quick.id]["activity_stale"] is False
        assert listed[slow.id]["activity_stale"] is True
        assert listed[slow.id]["task_name"] == "train"  # its last answer
        # Asked again while its question is unanswered: not asked twice, and its late
        # answer still lands.
        asked = len(slow.send.asked)  # type: ignore[attr-defined]
        await queries.refresh_activity([slow], timeout=0.05)
        assert len(slow.send.asked) == asked  # type: ignore[attr-defined]
        (question,) = slow.send.asked[-1:]  # type: ignore[attr-defined]
        queries.answer(slow, Stacks(request_id=question.request_id, now={"task_name": "eval"}))
        assert slow.now == {"task_name": "eval"} and not slow.now_stale
        # A lost process is no longer waited for.
        waiting = asyncio.create_task(queries.refresh_activity([slow], timeout=5))
        await asyncio.sleep(0)
        queries.lost(slow)
        await asyncio.wait_for(waiting, 1)

    asyncio.run(scenario())


class SlowWrites(Answering):
    """Answering, with each question taking ``seconds`` to write (a crowded hub's socket
    writes), and no answers."""

    def __init__(self, queries: ProcessQueries, seconds: float) -> None:
        super().__init__(queries, silent=True)
        self.seconds = seconds

    def __call__(self, message: ControlMessage | bytes) -> None:
        time.sleep(self.seconds)
        super().__call__(message)


def test_a_listing_asks_within_its_bound_and_the_next_one_asks_the_rest_first():
    async def scenario() -> None:
        registry = Registry()
        queries = ProcessQueries(registry)
        count = 2 * ASK_CHUNK + 10
        processes = []
        for pid in range(count):
            process = registry.add_process(ProcessRecord(pid, "node"), f"peer{pid}",
                                           lambda m: None)
            process.send = SlowWrites(queries, 0.15 / ASK_CHUNK)  # a chunk: 150 ms
            await registry.register_process(
                process, ProcessRecord(pid, "node", worker_id=f"w{pid}"))
            processes.append(process)
        started = time.monotonic()
        await queries.refresh_activity(processes, timeout=0.1)
        assert time.monotonic() - started < 0.5  # one chunk over the bound, not three
        first = [p for p in processes if p.send.asked]  # type: ignore[attr-defined]
        assert len(first) == ASK_CHUNK == queries.last_round_asked
        assert all(p.now_stale for p in processes)  # no answer: every one is stale
        await queries.refresh_activity(processes, timeout=0.1)
        second = [p for p in processes if p.send.asked and p not in first]  # type: ignore
        assert len(second) == ASK_CHUNK  # the ones not asked yet, not the first again
        # A selector on what processes run now asks every one, however long it takes.
        await queries.refresh_activity(processes, timeout=0.1, everyone=True)
        assert all(p.send.asked for p in processes)  # type: ignore[attr-defined]

    asyncio.run(scenario())


def test_a_listing_of_many_chunks_waits_for_the_answers_of_each():
    """Answers of the first chunk that all arrive before the next chunk is written do not
    end the round: the later chunks' answers land too."""
    async def scenario() -> None:
        registry = Registry()
        queries = ProcessQueries(registry)
        processes = [await linked(registry, queries, pid, "0", worker_id=f"w{pid}")
                     for pid in range(3 * ASK_CHUNK)]
        await queries.refresh_activity(processes, timeout=2)
        assert queries.last_round_asked == len(processes)
        assert not any(p.now_stale for p in processes)
        assert all(p.now == {"task_name": "train"} for p in processes)

    asyncio.run(scenario())
