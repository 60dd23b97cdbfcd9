"""Every logpoint hit reaches the hub (``raydebug logs``), also the hits that come while a
client debugs the process, after a conditional breakpoint stopped it and it was continued,
and those just before the process ends.

A loop of 15 with a conditional breakpoint (``i == 5``) and a logpoint: the process stops at
``i == 5`` as a session, a client attaches and continues, the loop runs on under that client
and the process ends at once. Whether the client set the cluster's breakpoints in the
process's pydevd (an IDE's child session: pydevd logs them in that child's console too) or
not (a plain attach), all 15 lines are the hub's, and the IDE's cluster console shows them.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import pytest

from devtools.ide import IdeLikeClient
from devtools.pythons import SOURCE, python_for
from helpers import TIMEOUT, HubProcess, finish, line_of, run, write_script
from raydebug.client.hub_api import post_json

pytestmark = pytest.mark.integration

JOB = """
from raydebug.agent import start_live_link

start_live_link()  # as RAYDEBUG_LIVE=1 does where raydebug's .pth is installed (not 3.12's)

def step(i):
    doubled = i * 2  # breakpoint line
    return doubled + 1  # logpoint line

input()  # the test says when the process is linked, so armed
for i in range(15):
    step(i)
print("done", flush=True)
"""
LINES = [f"log {i}" for i in range(15)]


def breakpoints(script: Path) -> list[dict[str, Any]]:
    return [{"line": line_of(script, "breakpoint line"), "condition": "i == 5"},
            {"line": line_of(script, "logpoint line"), "logMessage": "log {i}"}]


def logged(hub: HubProcess, count: int) -> list[str]:
    """The hub's logpoint lines (``GET /api/logpoints``, the source of ``raydebug logs``)
    without their ``[process]`` prefix, once there are ``count`` or after :data:`TIMEOUT`
    seconds; each poll waits for the next line."""
    deadline = time.monotonic() + TIMEOUT
    texts: list[str] = []
    after = 0
    while len(texts) < count and (remaining := deadline - time.monotonic()) > 0:
        answer = hub.get(f"/api/logpoints?after={after}&timeout={remaining:.2f}")
        texts += [text.split("] ", 1)[1].rstrip("\n") for _, text in answer["lines"]]
        after = answer["last"]
    return texts


# 3.11: the functions of the file rewritten; 3.12: sys.monitoring beside pydevd's.
@pytest.mark.parametrize("version", ["3.11", "3.12"])
def test_every_line_is_the_hubs_when_a_plain_client_continued(hub: HubProcess,
                                                              tmp_path: Path, version: str):
    script = write_script(tmp_path, "job.py", JOB)
    for spec in breakpoints(script):  # as `raydebug break` sets them
        post_json(hub.client_address, "/api/breakpoints", {"path": str(script), **spec})
    proc = hub.spawn_linked(script, python_for(version), PYTHONPATH=str(SOURCE))
    [session] = hub.wait_sessions(1)
    assert session["line"] == line_of(script, "breakpoint line")

    async def continue_and_leave() -> None:
        client = await hub.dap()
        stopped = await client.attach(session["id"])
        await client.request("continue", {"threadId": stopped.body["threadId"]})
        await client.request("disconnect", {})
        await client.close()

    run(continue_and_leave())
    code, out, err = finish(proc)
    assert code == 0 and "done" in out, err
    assert sorted(logged(hub, len(LINES))) == sorted(LINES)


def test_every_line_is_the_hubs_and_the_ides_when_its_child_continued(hub: HubProcess,
                                                                      tmp_path: Path):
    script = write_script(tmp_path, "job.py", JOB)

    async def scenario() -> None:
        ide = IdeLikeClient(hub)
        attach = await ide.open_cluster()
        assert ide.parent is not None
        await ide.parent.request("setBreakpoints", {"source": {"path": str(script)},
                                                    "breakpoints": breakpoints(script)})
        await ide.parent.request("configurationDone")
        assert (await attach).success
        proc = await asyncio.to_thread(hub.spawn_linked, script)
        child, _, thread_id = await ide.next_child()
        await child.request("continue", {"threadId": thread_id})
        code, out, err = await asyncio.to_thread(finish, proc)
        assert code == 0 and "done" in out, err
        console = [(await ide.parent.wait_event("output", timeout=TIMEOUT)).body["output"]
                   for _ in LINES]
        assert sorted(text.split("] ", 1)[1].rstrip("\n") for text in console) == sorted(LINES)
        await child.close()
        await ide.parent.close()

    run(scenario(), timeout=120)
    assert sorted(logged(hub, len(LINES))) == sorted(LINES)


ENDS_AFTER_LOGGING = """
import os
from raydebug.agent import start_live_link

start_live_link()
input()
for i in range(15):
    i  # logpoint line
{ending}
"""


# "exit": the interpreter's exit, whose atexit hook waits for what is queued; "_exit": no
# atexit, as a Ray worker ends once its job is done (Ray quits it from C): each line must be
# on the hub's connection before the line after the logpoint runs.
@pytest.mark.parametrize("ending", ["exit", "_exit"])
def test_the_lines_logged_just_before_the_process_ends_reach_the_hub(hub: HubProcess,
                                                                     tmp_path: Path,
                                                                     ending: str):
    # The link thread sends them: the interpreter's exit stopped it with lines still queued
    # (none, one or all 15 arrived, run by run).
    script = write_script(tmp_path, "job.py", ENDS_AFTER_LOGGING.format(
        ending="os._exit(0)" if ending == "_exit" else ""))
    post_json(hub.client_address, "/api/breakpoints", {
        "path": str(script), "line": line_of(script, "logpoint line"), "logMessage": "log {i}"})
    rounds = 5
    for _ in range(rounds):
        code, _, err = finish(hub.spawn_linked(script))
        assert code == 0, err
    assert sorted(logged(hub, rounds * len(LINES))) == sorted(LINES * rounds)
