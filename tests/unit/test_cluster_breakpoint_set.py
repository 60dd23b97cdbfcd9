"""In memory: the cluster's breakpoint set (what IDE parents set, merged, verified when a
process loads the file), how a parent answers and pushes it, and the agent's arm and its
evaluation of conditions, hit counts and logpoints."""

from __future__ import annotations

import asyncio
import sys
from typing import Any

import pytest

from devtools.scripted_peer import ScriptedParent
from raydebug.agent.armed.breakpoints import ArmedBreakpoints, BreakpointSet, local_names
from raydebug.agent.armed.line_breakpoint import format_log_message, hit_condition_met
from raydebug.errors import RemoteProtocolError
from raydebug.hub.clients.cluster_attach import ClusterAttach
from raydebug.hub.clients.cluster_sessions import ClusterSessions
from raydebug.hub.cluster_breakpoints import UNVERIFIED, ClusterBreakpointSet
from raydebug.hub.registry import Registry
from raydebug.protocol import Request
from raydebug.protocol.control import (
    ArmBreakpoints,
    BreakpointsLoaded,
    LogpointOutput,
    decode_control,
    encode_control,
)


def test_each_client_replaces_its_own_file_and_the_set_is_every_clients():
    book = ClusterBreakpointSet()
    first = book.set_breakpoints("ide", {"source": {"path": "/me/job.py"}, "breakpoints": [
        {"line": 3}, {"line": 7, "condition": "i == 2"}]}, local_root="/me")
    assert [(b["line"], b["verified"], b["message"]) for b in first["breakpoints"]] == [
        (3, False, UNVERIFIED), (7, False, UNVERIFIED)]
    book.set_breakpoints("cli", {"source": {"path": "/me/job.py"},
                                 "breakpoints": [{"line": 9, "logMessage": "x={x}"}]})
    again = book.set_breakpoints("ide", {"source": {"path": "/me/job.py"}, "breakpoints": [
        {"line": 7, "condition": "i == 2"}]}, local_root="/me")
    assert again["breakpoints"][0]["id"] == first["breakpoints"][1]["id"]  # unchanged: same id
    wire = book.wire()
    assert [(s["path"], s["localRoot"], [b["line"] for b in s["breakpoints"]])
            for s in wire["sources"]] == [("/me/job.py", "/me", [7]), ("/me/job.py", None, [9])]
    assert BreakpointSet.from_wire(wire).sources[1].breakpoints[0].log_message == "x={x}"

    changed = book.loaded(["/me/job.py"])
    assert {key: [b["line"] for b in views] for key, views in changed.items()} == {
        "ide": [7], "cli": [9]}
    assert all(view["verified"] and "message" not in view
               for views in changed.values() for view in views)
    assert book.loaded(["/me/job.py"]) == {}  # told once
    assert book.clear("ide") and not book.clear("ide")
    assert [s["path"] for s in book.wire()["sources"]] == ["/me/job.py"]
    book.set_breakpoints("cli", {"source": {"path": "/me/job.py"}, "breakpoints": []})
    assert book.empty


@pytest.mark.parametrize("arguments", [
    {"breakpoints": [{"line": 1}]},
    {"source": {"path": "/a.py"}, "breakpoints": [{"line": "1"}]},
    {"source": {"path": "/a.py"}, "breakpoints": [{"line": True}]},
])
def test_bad_breakpoints_are_a_clear_error(arguments: dict[str, Any]):
    with pytest.raises(ValueError, match="setBreakpoints"):
        ClusterBreakpointSet().set_breakpoints("ide", arguments)


def test_a_parent_pushes_its_breakpoints_is_told_when_verified_and_takes_them_away():
    pushed: list[dict[str, Any]] = []
    parents = ClusterSessions(push=pushed.append)
    path = "/home/me/job.py"
    client = ScriptedParent([
        Request(seq=2, command="setBreakpoints", arguments={
            "source": {"path": path}, "breakpoints": [{"line": 4, "hitCondition": "3"}]}),
        Request(seq=3, command="setBreakpoints", arguments={"breakpoints": []}),
    ])
    attach = Request(seq=1, command="attach", arguments={"raydebug": {"localRoot": "/home/me"}})
    parent = ClusterAttach(client, Registry(), parents, attach)  # type: ignore[arg-type]

    async def scenario() -> None:
        running = asyncio.ensure_future(parent.run())
        while len(client.responses) < 3:
            await asyncio.sleep(0)
        assert [c for c, _ in client.responses] == ["attach", "setBreakpoints",
                                                    "setBreakpoints"]
        assert client.responses[2][1].startswith("failed: setBreakpoints needs source.path")
        assert pushed[-1]["sources"][0]["localRoot"] == "/home/me"
        arm = parents.arm_message()
        assert isinstance(arm, ArmBreakpoints) and arm.breakpoints == pushed[-1]
        parents.loaded([path])
        [event] = [e for e in client.events if e.event == "breakpoint"]
        assert event.body["breakpoint"]["verified"] and event.body["reason"] == "changed"
        parents.logpoint({"task_name": "f", "labels": {"RANK": "3"}, "pid": 12},
                         LogpointOutput(text="x=1", path=path, line=4))
        [output] = [e for e in client.events if e.event == "output"]
        assert output.body["output"] == "[f, rank 3, pid 12] x=1\n"
        client.send(Request(seq=4, command="disconnect"))
        await asyncio.wait_for(running, 5)
        assert pushed[-1]["sources"] == [] and parents.arm_message().breakpoints["sources"] == []

    asyncio.run(scenario())


def test_the_new_control_messages_round_trip_and_are_checked():
    for message in (ArmBreakpoints(breakpoints={"sources": []}),
                    BreakpointsLoaded(paths=["/a.py"]),
                    LogpointOutput(text="hi", path="/a.py", line=3)):
        body = encode_control(message).split(b"\r\n\r\n", 1)[1]
        assert decode_control(body) == message
    with pytest.raises(RemoteProtocolError, match="list of strings"):
        decode_control(b'{"type": "breakpoints_loaded", "paths": [1]}')


def test_hit_conditions_and_log_messages():
    assert [hit_condition_met("3", n) for n in (2, 3, 4)] == [False, True, False]
    assert [hit_condition_met(">= 2", n) for n in (1, 2, 3)] == [False, True, True]
    assert [hit_condition_met("%2", n) for n in (1, 2, 3, 4)] == [False, True, False, True]
    with pytest.raises(ValueError, match="hit condition"):
        hit_condition_met("often", 1)
    values = {"x": 1, "d": {"k": 2}}
    assert format_log_message("x={x} {{x}} d={d['k']} bad={y}",
                              lambda e: eval(e, {}, values)) == (
        "x=1 {x} d=2 bad=<Error: NameError: name 'y' is not defined>")


def test_paths_map_to_the_working_dir_and_stay_for_functions_shipped_by_value():
    source = BreakpointSet.from_wire({"sources": [{"path": "/home/me/pkg/job.py",
                                                   "localRoot": "/home/me",
                                                   "breakpoints": [{"line": 1}]}]}).sources[0]
    assert local_names(source, "/tmp/ray/working_dir_files/_ray_pkg_ab") == {
        "/home/me/pkg/job.py", "/tmp/ray/working_dir_files/_ray_pkg_ab/pkg/job.py"}
    assert local_names(source, None) == {"/home/me/pkg/job.py"}


class NoBackend:
    def __init__(self) -> None:
        self.installed = False

    def install(self, armed: ArmedBreakpoints) -> None:
        self.installed = True

    def remove(self) -> None:
        self.installed = False

    def active(self) -> bool:
        return self.installed

    def forget_after_fork(self) -> None:
        self.installed = False


def test_a_hit_counts_logs_and_pauses_once_per_thread():
    hits: list[int] = []
    logs: list[str] = []
    backend = NoBackend()
    armed = ArmedBreakpoints(on_hit=lambda frame: hits.append(frame.f_locals["i"]),
                             on_log=lambda text, frame: logs.append(text),
                             labels=lambda: {"rank": "1"}, backend=backend)
    here = sys._getframe().f_code.co_filename
    armed.arm(BreakpointSet.from_wire({"sources": [{"path": here, "breakpoints": [
        {"line": 1, "condition": "RANK == '1' and i > 0", "hitCondition": "%2"},
        {"line": 1, "logMessage": "i={i} rank={rank}"},
        {"line": 1, "condition": "undefined_name"}]}]}))
    assert backend.installed
    for i in range(5):  # noqa: B007 (the conditions read i in this frame)
        armed.on_line(sys._getframe(), 1)
    assert hits == [2, 4] and logs == [f"i={i} rank=1" for i in range(5)]
    armed.disarm()
    assert not backend.installed and armed.files == frozenset()


def test_while_a_debugger_serves_the_process_logpoints_log_and_nothing_pauses():
    # The client's pydevd pauses then (and counts its own hits); a logpoint's line still
    # goes to the hub, which that pydevd never tells.
    hits: list[int] = []
    logs: list[str] = []
    served = [True]
    armed = ArmedBreakpoints(on_hit=lambda frame: hits.append(frame.f_locals["i"]),
                             on_log=lambda text, frame: logs.append(text),
                             standing_down=lambda: served[0], backend=NoBackend())
    here = sys._getframe().f_code.co_filename
    armed.arm(BreakpointSet.from_wire({"sources": [{"path": here, "breakpoints": [
        {"line": 1, "hitCondition": "2"}, {"line": 1, "logMessage": "i={i}"}]}]}))
    for i in range(5):  # the logpoint reads i in this frame
        served[0] = i < 3
        assert armed.on_line(sys._getframe(), 1) is (i == 4)
    assert logs == [f"i={i}" for i in range(5)]
    assert hits == [4]  # its second hit of its own


def test_the_hub_publishes_each_new_set_for_processes_that_start_later(
        caplog: pytest.LogCaptureFixture):
    from raydebug.hub import Hub, HubConfig

    hub = Hub(HubConfig())
    published: list[dict[str, Any] | None] = []
    hub.publish_breakpoints = published.append
    hub.cluster_sessions.cluster.set_breakpoints(
        "cli", {"source": {"path": "/me/job.py"}, "breakpoints": [{"line": 3}]},
        local_root="/me")
    hub.cluster_sessions.changed()
    hub.cluster_sessions.cluster.clear("cli")
    hub.cluster_sessions.changed()
    assert [bool(wire) for wire in published] == [True, False]
    first = published[0]
    assert first is not None and [s["path"] for s in first["sources"]] == ["/me/job.py"]
    assert published[1] is None  # none left: the published set is removed

    def failing(wire: dict[str, Any] | None) -> None:
        raise RuntimeError("the GCS is gone")

    hub.publish_breakpoints = failing  # the linked processes still get theirs; one line
    hub.cluster_sessions.changed()
    assert "could not publish the cluster's breakpoints: the GCS is gone" in caplog.text


def test_one_line_is_removed_of_the_terminals_and_the_pages_and_an_ides_stays():
    """``POST /api/breakpoints {"remove": {"path", "line"}}`` (``raydebug break --remove``):
    the terminal's or the web page's breakpoint on that line goes, the rest of the file
    stays, an IDE's on the same line stays (the IDE owns it), and every process is told."""
    pushed: list[dict[str, Any]] = []
    parents = ClusterSessions(push=pushed.append)
    parents.set_from_terminal({"path": "/me/job.py", "line": 3})
    parents.set_from_terminal({"path": "/me/job.py", "line": 7, "condition": "i > 2"})
    parents.set_from_terminal({"source": {"path": "/me/lib.py"}, "breakpoints": [{"line": 5}]})
    parents.cluster.set_breakpoints("ide", {"source": {"path": "/me/job.py"},
                                            "breakpoints": [{"line": 3}]})
    answer = parents.set_from_terminal({"remove": {"path": "/me/job.py", "line": 3}})
    assert [(b["path"], b["line"], b["client"]) for b in answer["removed"]] == [
        ("/me/job.py", 3, "terminal")]
    assert sorted((b["path"], b["line"], b["client"]) for b in answer["breakpoints"]) == [
        ("/me/job.py", 3, "ide"), ("/me/job.py", 7, "terminal"), ("/me/lib.py", 5, "web page")]
    assert [[b["line"] for b in s["breakpoints"]] for s in pushed[-1]["sources"]] == [
        [7], [5], [3]]
    sent = len(pushed)
    again = parents.set_from_terminal({"remove": {"path": "/me/job.py", "line": 3}})
    assert again["removed"] == [] and len(pushed) == sent  # nothing changed: nothing sent
    page = parents.set_from_terminal({"remove": {"path": "/me/lib.py", "line": 5}})
    assert [b["client"] for b in page["removed"]] == ["web page"]
    assert "/me/lib.py" not in parents.cluster.sources_of("web page")
    with pytest.raises(ValueError, match="absolute path"):
        parents.set_from_terminal({"remove": {"path": "job.py", "line": 3}})
