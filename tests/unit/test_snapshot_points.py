"""Snapshot points, in memory: a logpoint whose message is ``{snapshot}`` captures at each
hit its hit condition lets through and never pauses; ``raydebug break --snapshot --count N``
sets one and ``--list`` says so."""

from __future__ import annotations

import sys
from types import FrameType

from test_cluster_breakpoint_set import NoBackend

from raydebug.agent.armed.breakpoints import ArmedBreakpoints, BreakpointSet
from raydebug.cli.breakpoints import format_breakpoints
from raydebug.hub.clients.cluster_sessions import ClusterSessions
from raydebug.hub.cluster_breakpoints import DapSessionBreakpoints


def test_a_snapshot_point_captures_its_first_hits_and_never_pauses():
    paused: list[FrameType] = []
    taken: list[int] = []
    logs: list[str] = []
    armed = ArmedBreakpoints(on_hit=paused.append,
                             on_log=lambda text, frame: logs.append(text),
                             on_snapshot=lambda frame: taken.append(frame.f_locals["i"]),
                             backend=NoBackend())
    here = sys._getframe().f_code.co_filename
    armed.arm(BreakpointSet.from_wire({"sources": [{"path": here, "breakpoints": [
        {"line": 1, "logMessage": " {snapshot} ", "condition": "i % 2 == 1",
         "hitCondition": "<=2"}]}]}))
    for i in range(8):  # noqa: B007 (the condition reads i in this frame)
        assert armed.on_line(sys._getframe(), 1) is False
    assert taken == [1, 3]  # hits counted when the condition holds; two, then no more
    assert paused == [] and logs == []


def test_a_snapshot_point_that_fails_to_capture_lets_the_program_run_on():
    def failing(frame: FrameType) -> None:
        raise RuntimeError("no hub")

    armed = ArmedBreakpoints(on_hit=lambda frame: None, on_log=lambda text, frame: None,
                             on_snapshot=failing, backend=NoBackend())
    here = sys._getframe().f_code.co_filename
    armed.arm(BreakpointSet.from_wire({"sources": [{"path": here, "breakpoints": [
        {"line": 1, "logMessage": "{snapshot}"}]}]}))
    assert armed.on_line(sys._getframe(), 1) is False


def test_the_list_says_a_snapshot_point_and_its_count():
    listing = [{"path": "/x/job.py", "line": 12, "logMessage": "{snapshot}",
                "hitCondition": "<=3", "verified": True, "client": "terminal"},
               {"path": "/x/job.py", "line": 14, "logMessage": "{snapshot}",
                "condition": "i > 2", "verified": False, "client": "terminal"}]
    assert format_breakpoints(listing).splitlines() == [
        "/x/job.py:12 snapshot (first 3 hits per process)  [verified] (terminal)",
        "/x/job.py:14 if i > 2 snapshot  [not loaded yet] (terminal)"]


def test_an_attached_debugger_is_not_sent_snapshot_points():
    # The process's arm takes them while a client is attached too; pydevd would log
    # "{snapshot}" as an expression to evaluate.
    sessions = ClusterSessions()
    sessions.set_from_terminal({"path": "/srv/job.py", "line": 3})
    sessions.set_from_terminal({"path": "/srv/job.py", "line": 5, "logMessage": "{snapshot}",
                                "hitCondition": "<=1"})
    child = DapSessionBreakpoints(remote_root=None)
    [request] = child.bring_up_to(sessions.cluster)
    assert request.arguments["breakpoints"] == [{"line": 3}]
    assert sessions.cluster.wire()["sources"][0]["breakpoints"][1]["logMessage"] == \
        "{snapshot}"  # what the processes arm
