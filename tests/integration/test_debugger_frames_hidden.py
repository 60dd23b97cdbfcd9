"""The frames raydebug and pydevd add to a paused thread are never shown.

Four real processes paused four ways (``breakpoint()``, ``raydebug pause``, a cluster
breakpoint set as ``raydebug break`` sets it, post-mortem): ``raydebug stacks`` (the hub's
``/api/stacks``, which the web page's icicle draws too) shows no frame of raydebug's package
or of debugpy's (pydevd is vendored there), and each paused thread's stack ends at the
user's line (post-mortem: the line that raised, not the exception hook). A client with
``justMyCode: false`` (which shows library frames) gets the same top frame in ``stackTrace``
and evaluates the user's locals there: a cluster breakpoint's stop on 3.10/3.11 is made from
the call rewritten code makes, where pydevd's tracer ran on and stopped a second time in the
Python the stop itself ran (``contextlib``'s ``helper``), shown above the user's line. On
3.12 the stop is made in a ``sys.monitoring`` callback: checked to stay right.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import debugpy
import pytest

import raydebug
from devtools.pythons import SOURCE, python_for
from helpers import TIMEOUT, HubProcess, finish, line_of, run, write_script
from raydebug.client.hub_api import post_json

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]

RAYDEBUG = [sys.executable, "-m", "raydebug"]
DEBUGGER_DIRS = tuple(str(Path(module.__file__ or "").parent.resolve()) + os.sep
                      for module in (raydebug, debugpy))

PAUSED = """
import os, time

def work(how):
    value = 41
    if how == "breakpoint":
        breakpoint()  # breakpoint line
    elif how == "raise":
        raise ValueError(value)  # raise line
    elif how == "cluster":
        value += 1  # cluster line
    while True:
        value = value + 1 - 1  # loop line
        time.sleep(0.01)

input()  # the test says when the process is linked (so armed with the cluster's set)
work(os.environ["HOW"])
"""

HOWS = ("breakpoint", "pause", "cluster", "raise")


def debugger_files(frames: list[dict[str, Any]]) -> list[str]:
    return [f"{f['file']}:{f['line']} {f['function']}" for f in frames
            if str(Path(f["file"]).resolve()).startswith(DEBUGGER_DIRS)]


async def inspect_with_all_code(hub: HubProcess, session_id: str, expression: str
                                ) -> tuple[list[tuple[str, str, int]], str]:
    """Attach to ``session_id`` as a client with ``justMyCode: false``; its stack (name,
    path, line; innermost first) and ``expression`` evaluated in the top frame; continue."""
    client = await hub.dap()
    stopped = await client.attach(session_id, justMyCode=False)
    thread = stopped.body["threadId"]
    frames = (await client.request("stackTrace", {"threadId": thread}))["stackFrames"]
    value = await client.request("evaluate", {"expression": expression, "context": "repl",
                                              "frameId": frames[0]["id"]})
    await client.request("continue", {"threadId": thread})
    await client.request("disconnect", {})
    await client.close()
    shown = [(f["name"], f["source"]["path"], f["line"]) for f in frames]
    assert not [f for f in shown if str(Path(f[1]).resolve()).startswith(DEBUGGER_DIRS)], shown
    return shown, value["result"]


def test_paused_processes_show_the_users_frames_only(hub: HubProcess, tmp_path: Path):
    script = write_script(tmp_path, "paused.py", PAUSED)
    lines = {how: line_of(script, f"{how} line") for how in ("breakpoint", "raise", "cluster")}
    post_json(hub.client_address, "/api/breakpoints",
              {"path": str(script), "line": lines["cluster"]})
    procs = {how: hub.spawn_linked(script, HOW=how, RAYDEBUG_POST_MORTEM="1") for how in HOWS}
    hub.wait_sessions(3, state="waiting")
    status = post_json(hub.client_address, "/api/pause",
                       {"selector": [f"pid={procs['pause'].pid}"]})
    assert status["paused"], status
    sessions = {s["pid"]: s for s in hub.wait_sessions(4)}
    loop = range(line_of(script, "while True"), line_of(script, "time.sleep") + 1)

    done = subprocess.run([*RAYDEBUG, "stacks", "--json", "--hub", hub.client_address],
                          capture_output=True, text=True, timeout=TIMEOUT,
                          env={**os.environ, "NO_COLOR": "1"})
    assert done.returncode == 0, done.stderr
    answer = json.loads(done.stdout)
    by_pid = {entry["process"]["pid"]: entry for entry in answer["processes"]}
    for how, proc in procs.items():
        assert by_pid[proc.pid]["answered"], by_pid[proc.pid]
        threads = by_pid[proc.pid]["threads"]
        shown = {t["name"]: debugger_files(t["frames"]) for t in threads}
        assert all(files == [] for files in shown.values()), (how, shown)
        (main,) = [t["frames"] for t in threads if t["name"] == "MainThread"]
        top = (main[-1]["function"], main[-1]["line"])
        if how == "pause":
            assert top[0] == "work" and top[1] in loop, main
        else:
            assert top == ("work", lines[how]), (how, main)
        assert main[-2]["function"] == "<module>", (how, main)
    # The web page's icicle draws the hub's merged tree of the same stacks.
    nodes, drawn = [hub.get("/api/stacks?timeout=5")["tree"]["root"]], []
    while nodes:
        drawn += [node for node in nodes if node.get("file")]
        nodes = [child for node in nodes for child in node["children"] or ()]
    assert {node["function"] for node in drawn} >= {"work", "<module>"}, drawn
    assert debugger_files(drawn) == [], debugger_files(drawn)

    for how, proc in procs.items():
        frames, value = run(inspect_with_all_code(hub, sessions[proc.pid]["id"], "value"))
        (name, _, line) = frames[0]
        assert name == "work" and value in ("41", "42"), (how, frames, value)
        # breakpoint() stops at the next line, as pdb does: the loop's head
        assert line in loop if how in ("pause", "breakpoint") else line == lines[how], (how, line)


JOB = """
from raydebug.agent import start_live_link

start_live_link()  # as RAYDEBUG_LIVE=1 does where raydebug's .pth is installed (not 3.12's)

def work(n):
    total = 0
    for i in range(n):
        total += i  # breakpoint line
    return total

input()  # the test says when the process is linked, so armed
print("done", work(3), flush=True)
"""


# 3.10/3.11: the stop is made from the call of rewritten code; 3.12: in a sys.monitoring
# callback.
@pytest.mark.parametrize("version", ["3.10", "3.11", "3.12"])
def test_a_cluster_breakpoint_stops_at_the_users_line_with_just_my_code_off(
        hub: HubProcess, tmp_path: Path, version: str):
    script = write_script(tmp_path, "job.py", JOB)
    line = line_of(script, "breakpoint line")
    post_json(hub.client_address, "/api/breakpoints",
              {"path": str(script), "line": line, "condition": "i == 1"})
    proc = hub.spawn_linked(script, python_for(version), PYTHONPATH=str(SOURCE))
    [session] = hub.wait_sessions(1)
    frames, value = run(inspect_with_all_code(hub, session["id"], "i"))
    assert frames[:2] == [("work", str(script), line),
                          ("<module>", str(script), line_of(script, "work(3)"))], frames
    assert value == "1"
    code, out, err = finish(proc)
    assert code == 0 and out.split() == ["done", "3"], err
