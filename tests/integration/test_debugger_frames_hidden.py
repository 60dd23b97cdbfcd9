"""A cluster breakpoint's stop shows the user's line on top, also to a client with
``justMyCode: false`` (which shows library frames), and the user's locals evaluate there. On
3.10/3.11 the stop is made from the call rewritten code makes, where pydevd's tracer ran on
and stopped a second time in the Python the stop itself ran (``contextlib``'s ``helper``),
shown above the user's line. On 3.12 the stop is made in a ``sys.monitoring`` callback:
checked to stay right.
"""

from __future__ import annotations

import os
from pathlib import Path

import debugpy
import pytest
from test_armed_breakpoints import python_for
from test_python_versions import SOURCE

import raydebug
from helpers import HubProcess, finish, line_of, run, write_script
from raydebug.client.hub_api import post_json

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]

DEBUGGER_DIRS = tuple(str(Path(module.__file__ or "").parent.resolve()) + os.sep
                      for module in (raydebug, debugpy))


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


# 3.11: the stop is made from the call of rewritten code; 3.12: in a sys.monitoring callback.
@pytest.mark.parametrize("version", ["3.11", "3.12"])
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
