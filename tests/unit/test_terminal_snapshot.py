"""``raydebug attach`` on a snapshot, in memory: the terminal debugger's commands over the
read-only session itself (the hub's sans-IO SnapshotSession behind the Debuggee seam)."""

from __future__ import annotations

from typing import Any

import pytest

from raydebug.errors import DapRequestError
from raydebug.protocol import Event, Request, Response
from raydebug.protocol.snapshot_session import SnapshotSession
from raydebug.snapshots.format import ExceptionInfo, FrameCapture, Snapshot, Value
from raydebug.terminal import snapshot_rules
from raydebug.terminal.debugger import Outcome, TerminalDebugger
from raydebug.terminal.remote import DEFAULT_TIMEOUT, Stops

PATH = "/job/train.py"
SOURCE = ("def train(config, rows):\n    total = sum(rows)\n"
          "    raise ValueError(f'bad row total {total}')\n\n\ntrain(CONFIG, [1, 2, 3])\n")
ROW = {"id": "x0badc0ffee1", "reason": "exception", "pid": 42, "host": "node1",
       "exception": "ValueError: bad row total 6", "file": PATH, "line": 3,
       "function": "train", "thread_name": "MainThread", "age": 5.0, "snapshot": True}


def snapshot() -> Snapshot:
    config = Value("config", "dict", "{'layers': [8, 4], 'lr': 0.1}", children=[
        Value("['layers']", "list", "[8, 4]", children=[Value("[0]", "int", "8"),
                                                        Value("[1]", "int", "4")]),
        Value("['lr']", "float", "0.1")])
    return Snapshot(ROW["id"], "exception", 1.0, {"pid": 42, "host": "node1"}, "MainThread",
                    ExceptionInfo("ValueError", "bad row total 6", ""),
                    [FrameCapture("train", PATH, 3, SOURCE,
                                  [config, Value("total", "int", "6")]),
                     FrameCapture("<module>", PATH, 6, SOURCE, [])])


class SnapshotDebuggee:
    """The Debuggee seam answered by the hub's own SnapshotSession; requests recorded."""

    def __init__(self) -> None:
        self.stops = Stops()
        self.capabilities: dict[str, Any] = {}
        self.session = SnapshotSession(snapshot())
        self.commands: list[str] = []
        for command in ("attach", "configurationDone"):
            for message in self.session.handle(Request(0, command, {})):
                if isinstance(message, Event) and message.event == "stopped":
                    self.stops.on_stopped(message)

    def request(self, command: str, arguments: dict[str, Any] | None = None,
                timeout: float = DEFAULT_TIMEOUT) -> dict[str, Any]:
        self.commands.append(command)
        response = self.session.handle(Request(len(self.commands), command, arguments or {}))[0]
        assert isinstance(response, Response)
        if not response.success:
            raise DapRequestError(command, response.message)
        return response.body


def attached() -> tuple[TerminalDebugger, SnapshotDebuggee, list[str]]:
    debuggee = SnapshotDebuggee()
    printed: list[str] = []
    debugger = TerminalDebugger(debuggee, dict(ROW), printed.append)
    debugger.start()
    return debugger, debuggee, printed


def run(debugger: TerminalDebugger, printed: list[str], line: str) -> list[str]:
    printed.clear()
    assert debugger.execute(line) is Outcome.STOPPED
    return list(printed)


def test_attaching_says_it_is_a_snapshot_and_shows_the_raising_line():
    _, _, printed = attached()
    assert printed[:3] == [
        "snapshot x0badc0ffee1: process on node1, pid 42, taken 5 s ago",
        "failed: ValueError: bad row total 6",
        "read-only: the values as captured (where, up, down, l, ll, p, pp, locals, args, "
        "exceptions; q leaves)"]
    assert f"> {PATH}(3)train()" in printed


def test_looking_commands_read_the_capture():
    debugger, debuggee, printed = attached()
    assert run(debugger, printed, "p total") == ["6"]
    assert run(debugger, printed, "p config['layers'][1]") == ["4"]
    assert run(debugger, printed, "pp config") == ["{'layers': [8, 4], 'lr': 0.1}"]
    assert run(debugger, printed, "ll")[-1].split()[:2] == ["3", "->"]
    assert "source" in debuggee.commands  # the captured text, not an evaluate
    assert run(debugger, printed, "p total + 1") == [
        "*** a snapshot can only show captured values: a local, its items and attributes "
        "(config['layers'][0], obj.attr) and len(x)"]
    assert run(debugger, printed, "up")[0] == f"> {PATH}(6)<module>()"
    assert run(debugger, printed, "exceptions")[-1] == "ValueError: bad row total 6"


@pytest.mark.parametrize("line, cannot", [("n", "step"), ("s", "step"), ("r", "run to a return"),
                                          ("unt", "run"), ("b 2", "take breakpoints"),
                                          ("kill", "be killed")])
def test_commands_that_would_run_it_are_refused_before_anything_is_sent(line, cannot):
    debugger, debuggee, printed = attached()
    sent = list(debuggee.commands)
    (said,) = run(debugger, printed, line)
    assert said.startswith(f"*** snapshot x0badc0ffee1 is a capture of one moment: it cannot "
                           f"{cannot}, only show what was captured")
    assert debuggee.commands == sent


@pytest.mark.parametrize("line", ["q", "c"])
def test_q_and_c_close_it(line):
    debugger, debuggee, printed = attached()
    printed.clear()
    assert debugger.execute(line) is Outcome.QUIT
    assert printed == ["snapshot x0badc0ffee1 closed"]
    assert debuggee.commands[-1] == "disconnect" and debuggee.session.over


def test_pp_of_a_repr_that_is_no_literal_prints_it_as_it_is():
    assert snapshot_rules.pretty("<Model object at 0x1>") == ["<Model object at 0x1>"]
    assert snapshot_rules.pretty("[1, 2, ...]") == ["[1, 2, ...]"]
    assert len(snapshot_rules.pretty(repr({f"key{i}": i for i in range(20)}))) == 20
