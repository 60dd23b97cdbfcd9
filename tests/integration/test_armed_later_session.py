"""A cluster breakpoint past line 256 in a later session of a process, on Python 3.12 and 3.13.

In a later session pydevd's ``sys.monitoring`` tool, whose line events an earlier session
left on, is called for the stop's line event after ours: unless it is told to skip that
event, a ``continue`` stops a second time at the same line (pydevd's own "line seen twice"
guard compares line numbers with ``is``, which holds only for Python's cached ints, up to 256).
Shown: two sessions of one process at line 300, each continued once: the process runs on and
no second ``stopped`` comes.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
from pathlib import Path

import pytest

from devtools.pythons import SOURCE, ray_venv
from helpers import (
    HubProcess,
    find_python,
    line_of,
    next_line,
    run,
    venv_with_debugpy,
    write_script,
)

pytestmark = [pytest.mark.integration, pytest.mark.timeout(900)]

PADDING = "\n" * 295  # the breakpoint's line is past Python's cached ints (<= 256)
TARGET = PADDING + """
def work(i):
    doubled = i * 2  # breakpoint line
    return doubled
"""

WORKER = """
import json, sys, time
sys.path.insert(0, sys.argv[2])
from raydebug.agent import get_agent
import target

agent = get_agent()
agent.link.start()  # the live link does this at start
agent.link.attempted.wait(30)  # armed with the hub's set (none) before it registers: then ours
agent.arm_breakpoints(json.loads(sys.argv[1]))
for session in range(2):
    print("returned", target.work(session), flush=True)
    input()  # the test says when the client has left
    agent.debugger.wait_untraced(10)
    for _ in range(1000):  # the hub's ClientGone: until then pydevd's breakpoints count
        if not agent._client_attached:
            break
        time.sleep(0.01)
"""


@pytest.fixture(scope="module", params=["3.12", "3.13"])
def python(request: pytest.FixtureRequest) -> str:
    """3.12: the Ray venv (built once); 3.13: a venv with debugpy only."""
    if request.param == "3.12":
        found = ray_venv("3.12")
    else:
        base = find_python(request.param)
        found = base and venv_with_debugpy(base)
    if not found:
        pytest.skip(f"Python {request.param} is not installed")
    return str(found)


def test_continue_at_a_line_past_256_in_a_later_session_stops_once(
        hub: HubProcess, tmp_path: Path, python: str) -> None:
    code_dir = tmp_path / "code"
    code_dir.mkdir()
    target = code_dir / "target.py"
    target.write_text(TARGET)
    line = line_of(target, "breakpoint line")
    assert line > 256
    script = write_script(tmp_path, "worker.py", WORKER)
    breakpoints = {"sources": [{"path": str(target), "breakpoints": [{"line": line}]}]}
    proc = subprocess.Popen([python, str(script), json.dumps(breakpoints), str(code_dir)],
                            env=hub.env(PYTHONPATH=str(SOURCE)), stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, bufsize=0)
    hub.workers.append(proc)  # type: ignore[arg-type]  # stopped by pid at teardown

    async def stop_once(session_number: int) -> None:
        [session] = hub.wait_sessions(1, timeout=60, state="waiting")
        assert (session["line"], session["reason"]) == (line, "breakpoint")
        client = await hub.dap()
        # As an IDE's child session: the cluster's breakpoints are set in pydevd too.
        stopped = await client.attach(session["id"], timeout=60)
        await client.request("setBreakpoints", {"source": {"path": str(target)},
                                                "breakpoints": [{"line": line}]})
        await client.request("continue", {"threadId": stopped.body["threadId"]})
        returned = asyncio.ensure_future(asyncio.to_thread(next_line, proc))
        again = asyncio.ensure_future(client.wait_event("stopped", timeout=60))
        done, _ = await asyncio.wait({returned, again}, return_when=asyncio.FIRST_COMPLETED)
        if again in done:
            frames = await client.request("stackTrace", {"threadId": again.result().body[
                "threadId"]})
            await client.request("disconnect", {})
            raise AssertionError(f"session {session_number} stopped twice: "
                                 f"{frames['stackFrames'][0]}")
        again.cancel()
        assert returned.result().split() == ["returned", str(session_number * 2)]
        await client.request("disconnect", {})
        await client.close()

    try:
        for session_number in range(2):
            run(stop_once(session_number), timeout=120)
            assert proc.stdin is not None
            proc.stdin.write(b"\n")
    except Exception as error:
        proc.kill()
        raise AssertionError(proc.communicate()[1].decode()[-3000:]) from error
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err[-3000:]
