"""``raydebug attach --group``'s prompt in memory (terminal/group.py): typed lines in, DAP
requests and printed lines out, through the Debuggee seam (a scripted group session of three
paused processes instead of a hub and their pydevds). The real thing is
tests/integration/test_terminal_group.py."""

from __future__ import annotations

from typing import Any

import pytest

from raydebug.errors import DapRequestError
from raydebug.protocol import Event
from raydebug.terminal import group, running
from raydebug.terminal.debugger import Outcome
from raydebug.terminal.group import GroupDebugger
from raydebug.terminal.remote import DEFAULT_TIMEOUT, Debuggee, Stops
from raydebug.terminal.sources import fetch_expression

PATH = "/work/step.py"
SOURCE = "def step(rank):\n    total = rank\n    total += 1\n    return total\n"


def name(thread: int) -> str:
    return f"rank {thread - 1} · pid {100 + thread} · MainThread"


class ScriptedGroup:
    """A group session whose threads 1, 2, 3 (ranks 0-2) are stopped at line 2 of PATH.
    ``next`` moves a thread one line down, or (``exits``) ends its process instead."""

    def __init__(self) -> None:
        self.stops = Stops()
        self.capabilities: dict[str, Any] = {}
        self.requests: list[tuple[str, dict[str, Any]]] = []
        self.lines = {1: 2, 2: 2, 3: 2}
        self.exits: set[int] = set()
        self.running: dict[int, str] = {}  # threads of live processes that run, by id
        self.on_continue = lambda: None
        self._seq = 0
        for thread in self.lines:
            self.stop(thread)

    def request(self, command: str, arguments: dict[str, Any] | None = None,
                timeout: float = DEFAULT_TIMEOUT) -> dict[str, Any]:
        arguments = arguments or {}
        self.requests.append((command, arguments))
        body: dict[str, Any] = getattr(self, f"{command}_request")(arguments)
        return body

    def stop(self, thread: int, line: int = 2) -> None:
        self.lines[thread] = line
        self._seq += 1
        self.stops.on_stopped(Event(self._seq, "stopped", {"threadId": thread,
                                                            "reason": "breakpoint"}))

    def threads_request(self, arguments: dict[str, Any]) -> dict[str, Any]:
        return {"threads": [{"id": t, "name": name(t)} for t in sorted(self.lines)] +
                [{"id": t, "name": n} for t, n in sorted(self.running.items())]}

    def end_process(self, thread: int) -> None:
        del self.lines[thread]
        self.stops.on_thread(Event(0, "thread", {"reason": "exited", "threadId": thread}))

    def pause_request(self, arguments: dict[str, Any]) -> dict[str, Any]:
        thread = arguments["threadId"]
        if thread not in self.lines and thread not in self.running:
            raise DapRequestError("pause", f"threadId {thread} is no longer valid")
        self.stop(thread, self.lines.get(thread, 2))
        return {}

    def stackTrace_request(self, arguments: dict[str, Any]) -> dict[str, Any]:
        line = self.lines[arguments["threadId"]]
        return {"stackFrames": [{"id": 10 * arguments["threadId"], "name": "step",
                                 "line": line, "source": {"path": PATH}}]}

    def evaluate_request(self, arguments: dict[str, Any]) -> dict[str, Any]:
        assert arguments["expression"] == fetch_expression(PATH)
        return {"result": repr(SOURCE)}

    def next_request(self, arguments: dict[str, Any]) -> dict[str, Any]:
        thread = arguments["threadId"]
        if thread in self.exits:
            self.end_process(thread)
        else:
            self.stop(thread, self.lines[thread] + 1)
        return {}

    def disconnect_request(self, arguments: dict[str, Any]) -> dict[str, Any]:
        return {}

    def continue_request(self, arguments: dict[str, Any]) -> dict[str, Any]:
        self.on_continue()
        return {"allThreadsContinued": not arguments.get("singleThread")}


@pytest.fixture
def prompt(monkeypatch: pytest.MonkeyPatch) -> tuple[ScriptedGroup, GroupDebugger, list[str]]:
    """The prompt after its start, its lines forgotten."""
    monkeypatch.setattr(group, "START_QUIET", 0.01)
    debuggee = ScriptedGroup()
    seam: Debuggee = debuggee
    said: list[str] = []
    debugger = GroupDebugger(seam, {"id": "group (rank=0-2)"}, said.append,
                             selector="rank=0-2")
    debugger.start()
    assert said[:3] == ["group session (rank=0-2): 3 threads stopped in 3 processes",
                        "(`threads`: all of them; `c`: continue all; `c1`: only this one)",
                        f"thread 1 ({name(1)})"]
    said.clear()
    debuggee.requests.clear()
    return debuggee, debugger, said


def test_c1_continues_one_thread_and_moves_to_the_next_stopped_one_round_to_the_first(
        prompt: tuple[ScriptedGroup, GroupDebugger, list[str]]):
    debuggee, debugger, said = prompt

    assert debugger.execute("c1") is Outcome.STOPPED
    assert debuggee.requests[1] == ("continue", {"threadId": 1, "singleThread": True})
    assert said[:2] == [f"thread 1 ({name(1)}) runs on", f"thread 2 ({name(2)})"]
    debugger.execute("thread 3")
    said.clear()
    debugger.execute("c1")  # the last by rank: round to the first still stopped
    assert said[:2] == [f"thread 3 ({name(3)}) runs on", f"thread 2 ({name(2)})"]


def test_n_steps_one_thread_and_its_processs_end_moves_to_another_stopped_thread(
        prompt: tuple[ScriptedGroup, GroupDebugger, list[str]]):
    debuggee, debugger, said = prompt

    debugger.execute("n")
    assert debuggee.lines == {1: 3, 2: 2, 3: 2}  # the others stay where they were
    debuggee.exits.add(1)
    said.clear()
    assert debugger.execute("n") is Outcome.STOPPED
    assert said[:2] == [f"thread 1 ({name(1)}) has exited: its process ended",
                        f"thread 2 ({name(2)})"]
    assert debugger.thread_id == 2


def test_a_process_that_pauses_later_is_said_before_the_prompt_as_joined(
        prompt: tuple[ScriptedGroup, GroupDebugger, list[str]]):
    debuggee, debugger, said = prompt

    debuggee.stop(4)
    debugger.announce_other_stops()
    assert said == [f"(joined: thread 4 ({name(4)}); `thread 4` switches)"]
    said.clear()
    debugger.announce_other_stops()
    assert said == []  # said once


def test_the_current_threads_process_ending_at_the_prompt_moves_it_to_another_stopped_one(
        prompt: tuple[ScriptedGroup, GroupDebugger, list[str]]):
    """(kill -9 of the current rank while the prompt waits for a line: the prompt stayed on
    its thread, and `p`, `n`... answered 'threadId 1 is no longer valid')"""
    debuggee, debugger, said = prompt

    debuggee.end_process(1)
    debugger.announce_other_stops()
    assert said[:2] == [f"(left: thread 1 ({name(1)}): its process ended)",
                        f"thread 2 ({name(2)})"]
    assert debugger.thread_id == 2
    debuggee.requests.clear()
    debugger.execute("n")
    assert debuggee.requests[0] == ("next", {"threadId": 2})


def ctrl_c_then_q(after: int = 30) -> Any:
    """poll_input for a wait: Ctrl-C at the first look at the keyboard, then nothing, then
    (``after`` looks, ~3 s) ``q``, so that a wait no stop ends is bounded."""
    looks = iter(range(after + 1))

    def poll() -> str | None:
        look = next(looks, after)
        if look == 0:
            raise KeyboardInterrupt
        return "q" if look >= after else None
    return poll


def test_ctrl_c_once_the_current_threads_process_ended_pauses_the_groups_running_ones(
        prompt: tuple[ScriptedGroup, GroupDebugger, list[str]]):
    debuggee, debugger, said = prompt
    debuggee.running = {7: "pid 300 · MainThread", 8: "pid 300 · loader"}
    # `c`: every process runs; thread 1's process ends; ranks 1 and 2 run on.
    debuggee.on_continue = lambda: debuggee.end_process(1)
    debugger.poll_input = ctrl_c_then_q()

    assert debugger.execute("c") is Outcome.STOPPED
    paused = [arguments["threadId"] for command, arguments in debuggee.requests
              if command == "pause"]
    assert paused[0] == 2  # each process once (rank 1 first), none of the ended one's
    assert sorted(paused) == [2, 3, 7]
    assert not [line for line in said if "cannot pause" in line]


def test_ctrl_c_with_nothing_of_the_group_running_says_so_once_and_asks_nothing(
        prompt: tuple[ScriptedGroup, GroupDebugger, list[str]],
        monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(running, "PAUSE_RETRY", 0.05)
    monkeypatch.setattr(running, "PAUSE_GIVE_UP", 0.1)
    debuggee, debugger, said = prompt

    def every_process_ends() -> None:
        for thread in list(debuggee.lines):
            debuggee.end_process(thread)
    debuggee.on_continue = every_process_ends
    debugger.poll_input = ctrl_c_then_q(after=10)

    assert debugger.execute("c") is Outcome.QUIT  # the `q` after the Ctrl-C
    assert [c for c, _ in debuggee.requests if c == "pause"] == []
    assert said.count("(no process of the group runs now: waiting for the next stop; "
                      "Ctrl-C again or q detaches)") == 1
    assert not [line for line in said if "does not pause" in line]


def test_a_line_typed_while_the_group_runs_is_said_not_run_in_the_groups_words(
        prompt: tuple[ScriptedGroup, GroupDebugger, list[str]]):
    _, debugger, said = prompt
    typed = iter(["p total", "q"])
    debugger.poll_input = lambda: next(typed)

    assert debugger.execute("c") is Outcome.QUIT  # nothing stops; `q` detaches
    assert "*** the group is running: Ctrl-C pauses it, q detaches" in said
