"""Cluster breakpoints armed in a process, on real interpreters (3.10, 3.11, 3.12, 3.13).

The process arms the set itself, as the hub's ``ArmBreakpoints`` would, and reaches the lines
with no ``breakpoint()`` in its code; a DAP client attaches through a real hub. Shown: a
conditional breakpoint stops exactly the matching iteration, at its line, before it runs,
with its locals; a logpoint hit 20 times gives 20 texts and no pause; after the session the
set is armed again (a second call stops again); code of other files is not traced (on 3.10/3.11
the file's code is rewritten: no trace function, and steps after the stop are pydevd's); clearing
the set leaves no trace function and no ``sys.monitoring`` tool.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from devtools.pythons import PYTHONS, SOURCE, python_for
from helpers import HubProcess, line_of, next_line, run, write_script

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]

TARGET = """
def work(n, label):
    total = 0
    for i in range(n):
        total += i  # logpoint line
        doubled = i * 2  # breakpoint line
    return total
"""

ELSEWHERE = """
import sys

def untraced_here():
    frame = sys._getframe()
    if sys.version_info >= (3, 12):
        from raydebug.agent.armed import monitoring as m
        tools = [t for t in m.TOOL_IDS if sys.monitoring.get_tool(t) == m.TOOL_NAME]
        return all(sys.monitoring.get_local_events(t, frame.f_code) == 0 for t in tools)
    return frame.f_trace is None
"""

WORKER = """
import json, sys, threading, time
sys.path.insert(0, sys.argv[2])
from raydebug.agent import get_agent
import target, elsewhere

agent = get_agent()
agent.link.start()  # the live link does this at start
agent.link.attempted.wait(30)  # armed with the hub's set (none) before it registers: then ours
logged = []
post = agent._post_logpoint
agent.breakpoints._on_log = lambda text, frame: (logged.append(text), post(text, frame))
agent.arm_breakpoints(json.loads(sys.argv[1]))
modes = sorted(set(agent.breakpoints.modes().values())) or ["-"]  # 3.10/3.11: rewrite
print("armed", agent.breakpoints.active(), "elsewhere untraced", elsewhere.untraced_here(),
      *modes, flush=True)
target.work(20, "log")  # the logpoints only: the condition names label "stop"
print("logged", len(logged), logged[0], logged[-1], flush=True)
target.work(20, "stop")
input()  # the test says when the client has left
agent.debugger.wait_untraced(10)
for _ in range(1000):  # the hub's ClientGone: until then pydevd's breakpoints would count
    if not agent._client_attached:
        break
    time.sleep(0.01)
target.work(10, "stop")
agent.debugger.wait_untraced(10)  # pydevd's second session left, as after the first
agent.arm_breakpoints({})
print("cleared", agent.breakpoints.active(), sys.gettrace(), flush=True)
"""


@pytest.mark.parametrize("version", ["3.11", *sorted(PYTHONS)])
def test_armed_breakpoint_logpoint_and_clearing(hub: HubProcess, tmp_path: Path,
                                                version: str) -> None:
    python = python_for(version)
    code_dir = tmp_path / "code"
    code_dir.mkdir()
    target = write_script(code_dir, "target.py", TARGET)
    write_script(code_dir, "elsewhere.py", ELSEWHERE)
    script = write_script(tmp_path, "worker.py", WORKER)
    stop_line, log_line = line_of(target, "breakpoint line"), line_of(target, "logpoint line")
    breakpoints = {"sources": [{"path": str(target), "breakpoints": [
        {"line": stop_line, "condition": "i == 7 and label == 'stop'"},
        {"line": log_line, "logMessage": "i={i} of {label} on rank {RANK}"}]}]}
    proc = subprocess.Popen([python, str(script), json.dumps(breakpoints), str(code_dir)],
                            env=hub.env(PYTHONPATH=str(SOURCE), RANK="3"),
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, bufsize=0)  # unbuffered: see next_line

    hub.workers.append(proc)  # type: ignore[arg-type]  # stopped by pid at teardown
    # "rewrite": rewritten code, no trace function (agent/armed/code.py)
    mode = "rewrite" if version in ("3.10", "3.11") else "-"
    assert next_line(proc).split() == ["armed", "True", "elsewhere", "untraced", "True", mode]

    async def take_stop(expected_label: str) -> None:
        [session] = hub.wait_sessions(1, timeout=60, state="waiting")
        assert (session["file"], session["line"], session["reason"]) == (
            str(target), stop_line, "breakpoint")
        client = await hub.dap()
        stopped = await client.attach(session["id"], timeout=60)
        assert stopped.body["reason"] == "breakpoint"
        frames = await client.request("stackTrace", {"threadId": stopped.body["threadId"]})
        top = frames["stackFrames"][0]
        assert (top["source"]["path"], top["line"]) == (str(target), stop_line)
        for expression, value in (("i", "7"), ("label", repr(expected_label)),
                                  ("doubled", "12")):  # the line has not run yet: 6 * 2
            result = await client.request("evaluate", {"expression": expression,
                                                       "frameId": top["id"],
                                                       "context": "repl"})
            assert result["result"] == value, (expression, result)
        # A step goes on in pydevd: the loop's head, then the logpoint's line (also in a
        # later session: on 3.12+ pydevd was then told of the stop's line event too).
        for line in (stop_line - 2, stop_line - 1):
            await client.request("next", {"threadId": stopped.body["threadId"]})
            step = await client.wait_event("stopped", timeout=30)
            frames = await client.request("stackTrace", {"threadId": step.body["threadId"]})
            assert frames["stackFrames"][0]["line"] == line, frames["stackFrames"][0]
        await client.request("disconnect", {})
        await client.close()

    words = next_line(proc).split(" ", 2)
    assert words[:2] == ["logged", "20"], words
    assert words[2].strip() == "i=0 of log on rank 3 i=19 of log on rank 3"
    run(take_stop("stop"), timeout=120)
    assert proc.stdin is not None
    proc.stdin.write(b"\n")
    try:
        run(take_stop("stop"), timeout=120)  # armed again after pydevd's session
    except Exception as error:
        proc.kill()
        raise AssertionError(proc.communicate()[1].decode()[-3000:]) from error
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    assert out.split() == [b"cleared", b"False", b"None"], (out, err[-2000:])
