"""The hub's registry, in memory: states, waiting, attach rules."""

from __future__ import annotations

import asyncio
import json

import pytest

from raydebug.errors import HubFullError, SessionBusyError, SessionNotFoundError
from raydebug.hub.registry import Registry
from raydebug.process_record import ProcessRecord
from raydebug.session import PausedThread, SessionState

HERE = ProcessRecord(pid=1, host="h")  # what a process's Identify says


def record(session_id: str, since: float) -> PausedThread:
    return PausedThread(id=session_id, pid=1, host="h", file="f.py", line=1, function="f",
                         since=since)


def states(registry: Registry) -> dict[str, str]:
    return {s["id"]: s["state"] for s in registry.sessions()}


def test_attach_marks_every_session_of_the_process_and_detach_restores():
    async def scenario() -> None:
        registry = Registry()
        process = registry.add_process(HERE, "peer", lambda message: None)
        other = registry.add_process(HERE, "peer2", lambda message: None)
        await registry.add_session(process, record("a", 1))
        await registry.add_session(process, record("b", 2))
        await registry.add_session(other, record("c", 3))
        client = object()
        await registry.attach(registry.get("a"), client)
        assert states(registry) == {"a": "attached", "b": "attached", "c": "waiting"}
        with pytest.raises(SessionBusyError, match="already being debugged"):
            await registry.attach(registry.get("b"), object())
        await registry.add_session(process, record("d", 4))  # paused while attached
        assert states(registry)["d"] == "attached"
        assert registry.oldest_waiting().record.id == "c"  # type: ignore[union-attr]
        await registry.detach(process, client)
        assert set(states(registry).values()) == {"waiting"}
        await registry.remove_process(process)
        assert states(registry) == {"c": "waiting"}

    asyncio.run(scenario())


def test_waiting_for_a_session_wakes_on_registration():
    async def scenario() -> None:
        registry = Registry()
        waiter = asyncio.ensure_future(registry.wait_for_waiting())
        await asyncio.sleep(0)
        assert not waiter.done()
        process = registry.add_process(HERE, "peer", lambda message: None)
        await registry.add_session(process, record("x", 1))
        session = await asyncio.wait_for(waiter, 1)
        assert session.record.id == "x"
        await asyncio.wait_for(registry.wait_for_count(maximum=1), 1)

    asyncio.run(scenario())


def test_unknown_ids_name_the_known_ones_and_limits_hold():
    async def scenario() -> None:
        registry = Registry(max_sessions=1)
        process = registry.add_process(HERE, "peer", lambda message: None)
        await registry.add_session(process, record("known", 1))
        with pytest.raises(SessionNotFoundError, match="sessions: known"):
            registry.get("other")
        with pytest.raises(HubFullError, match="--max-sessions") as full:
            await registry.add_session(process, record("second", 2))
        assert (full.value.session_id, full.value.max_sessions) == ("second", 1)
        await registry.add_session(process, record("known", 1))  # a re-sent id is fine
        intruder = registry.add_process(HERE, "peer2", lambda message: None)
        with pytest.raises(SessionBusyError, match="another process"):
            await registry.add_session(intruder, record("known", 1))

    asyncio.run(scenario())


def test_a_process_id_names_its_host_and_pid_whichever_hub_gave_it():
    def add(registry: Registry, host: str, pid: int) -> str:
        return registry.add_process(ProcessRecord(pid, host), "peer", lambda m: None).id

    first, second = Registry(), Registry()  # a hub, and the same hub restarted
    kept = add(first, "n1", 10)
    assert add(second, "n1", 10) == kept
    assert len({kept, add(first, "n1", 11), add(first, "n2", 10)}) == 3
    again = add(first, "n1", 10)  # a reconnect before the old connection was seen to drop
    assert again.startswith(f"{kept}-")
    ids = [process.id for process in first.all_processes()]
    assert len(ids) == len(set(ids)) == 4


def test_a_long_poll_wakes_on_the_next_change_of_processes_not_before():
    async def scenario() -> None:
        registry = Registry()
        seen = registry.version
        waiter = asyncio.ensure_future(registry.wait_for_version_after(seen))
        await asyncio.sleep(0)
        assert not waiter.done()
        process = registry.add_process(HERE, "peer", lambda message: None)
        await asyncio.sleep(0)
        assert not waiter.done()  # connected, not yet registered: nothing listed changed
        await registry.register_process(process, ProcessRecord(pid=1, host="h"))
        await asyncio.wait_for(waiter, 1)
        assert registry.version > seen
        # A version already passed answers at once.
        await asyncio.wait_for(registry.wait_for_version_after(seen), 1)

    asyncio.run(scenario())


def test_the_sessions_json_is_the_listing_one_per_line_and_follows_the_state():
    async def scenario() -> None:
        registry = Registry()
        assert registry.sessions_json() == b"[]"
        process = registry.add_process(HERE, "peer \"quoted\"", lambda message: None)
        await registry.add_session(process, PausedThread(
            id="a", pid=1, host="h", file="f.py", line=1, function="f", since=1.5,
            argv=["python", "é"], labels={"rank": "0"}))
        await registry.add_session(process, record("b", 2))
        expected = "[\n" + ",\n".join(json.dumps(s) for s in registry.sessions()) + "\n]"
        assert registry.sessions_json().decode() == expected
        await registry.attach(registry.get("a"), object())
        assert [s["state"] for s in json.loads(registry.sessions_json())] == ["attached"] * 2
        assert json.loads(registry.sessions_json(SessionState.WAITING)) == []

    asyncio.run(scenario())
