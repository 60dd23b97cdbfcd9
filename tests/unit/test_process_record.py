"""A process's record, from the agent that builds it to the hub that lists it."""

from __future__ import annotations

import asyncio
import json

import pytest

from raydebug.agent.link import discovery, live
from raydebug.errors import RemoteProtocolError
from raydebug.hub.registry import Registry
from raydebug.process_record import IDENTIFY_FIELDS, ProcessRecord


def test_what_identify_and_register_carry(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("RANK", "0")
    monkeypatch.delenv(discovery.RAY_TASK_VARIABLE, raising=False)
    record = live.process_record()
    assert set(record.to_dict(IDENTIFY_FIELDS)) == {"pid", "host", "argv", "python"}
    # Register: what a process says, none of Ray's ids outside Ray (not even as null).
    assert set(record.to_dict()) == {"pid", "host", "argv", "python", "labels", "since",
                                     "parent_pid"}
    monkeypatch.setenv(discovery.RAY_TASK_VARIABLE,
                       json.dumps({"job_id": "02000000", "task_name": "spawns"}))
    started_by_a_task = live.process_record().to_dict()
    assert (started_by_a_task["job_id"], started_by_a_task["task_name"]) == ("02000000",
                                                                             "spawns")


def test_records_round_trip_and_ignore_unknown_fields():
    record = ProcessRecord(pid=4, host="node", argv=["python", "job.py"], python="3.11.7",
                           labels={"RANK": "0"}, since=1.5, parent_pid=1, worker_id="w")
    assert ProcessRecord.from_dict({**record.to_dict(), "future": 1}) == record
    assert ProcessRecord.from_dict({"pid": 4, "host": "node", "job_id": None}) == \
        ProcessRecord(pid=4, host="node")


@pytest.mark.parametrize("changes, error", [
    ({"pid": "4"}, "pid"),
    ({"labels": ["RANK=0"]}, "labels"),
    ({"since": "yesterday"}, "since"),
    ({"parent_pid": "1"}, "parent_pid"),
    ({"node_ip": 10}, "node_ip"),
    ({"host": None}, "incomplete"),
])
def test_invalid_records_are_the_agents_fault(changes: dict[str, object], error: str):
    with pytest.raises(RemoteProtocolError, match=error):
        ProcessRecord.from_dict({"pid": 4, "host": "node", **changes})


def test_the_hub_lists_what_the_process_reported():
    async def scenario() -> None:
        registry = Registry()
        identified = ProcessRecord.from_dict({"pid": 4, "host": "node", "argv": ["a"],
                                              "python": "3.11.7"})
        process = registry.add_process(identified, "peer", lambda message: None)
        view = registry.process_view(process)  # linked at a pause: only Identify said
        assert (view["labels"], view["since"], view["parent"], view["live"]) == \
            ({}, process.connected_at, None, False)
        registered = ProcessRecord(pid=4, host="node", argv=["a"], labels={"RANK": "2"},
                                   since=1.5, parent_pid=1, job_id="02000000",
                                   task_name="train")
        await registry.register_process(process, registered)
        view = registry.process_view(process)
        assert {name: view[name] for name in ("pid", "host", "argv", "labels", "since",
                                              "job_id", "task_name", "live")} == \
            {"pid": 4, "host": "node", "argv": ["a"], "labels": {"RANK": "2"},
             "since": 1.5, "job_id": "02000000", "task_name": "train", "live": True}
        (listed,) = json.loads(registry.processes_json([process]))
        # The listing's keys, in the order `raydebug ps --json` has printed them.
        assert list(listed) == ["id", "live", "pid", "host", "argv", "labels", "since",
                                "job_id", "node_id", "node_ip", "worker_id", "sessions",
                                "parent", "state", "activity_stale", "task_name",
                                "actor_class"]
        assert {name: listed[name] for name in view} == view

    asyncio.run(scenario())
