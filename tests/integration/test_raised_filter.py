"""The IDE's ``raised`` exception filter, cluster-wide, in a plain linked process (3.10 and
3.11: the trace function; 3.12: ``sys.monitoring``'s ``RAISE``).

An IDE-like client sets ``raised`` on its cluster session before the process starts
(``RAYDEBUG_LIVE=1``); the process raises and catches a ``ValueError`` twice (and the
standard library raises and catches a ``KeyError`` inside itself). Shown: exactly two stops,
each a child session stopped with reason ``exception`` in the frame that raised, with the
exception's type and text as pydevd reports them (``stopped``, ``exceptionInfo``); not again
in the caller it propagates into, not in library code; the program goes on as if it never
stopped. Afterwards clearing the filter leaves no tool and no trace function.
"""

from __future__ import annotations

import asyncio
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from devtools.ide import IdeLikeClient
from devtools.pythons import SOURCE, ray_venv
from helpers import HubProcess, find_python, line_of, run, venv_with_debugpy, write_script

pytestmark = [pytest.mark.integration, pytest.mark.timeout(900)]

JOB = """
import os, sys, time
from raydebug.agent import get_agent

def check(i):
    if i % 2:
        raise ValueError(f"odd {i}")  # raise line
    return i

def client_gone():  # the next raise is ours to stop, not the leaving client's pydevd's
    agent = get_agent()
    agent.debugger.wait_untraced(10)
    for _ in range(1000):  # and, on 3.11, our trace function is this thread's again
        if not agent._client_attached and (sys.version_info >= (3, 12) or getattr(
                sys.gettrace(), "raydebug_armed", False)):
            return
        time.sleep(0.01)

def work():
    caught = 0
    for i in range(4):
        os.environ.get("RAYDEBUG_NO_SUCH_VARIABLE")  # a KeyError raised and caught in os
        try:
            check(i)
        except ValueError:
            caught += 1
            client_gone()
    return caught

input()  # the test says when the process is linked
print("done", work(), flush=True)
input()  # the test says when the filter is cleared
for _ in range(1000):  # the hub's ArmBreakpoints with no filter is on its way
    if not get_agent().breakpoints.active():
        break
    time.sleep(0.01)
monitoring = getattr(sys, "monitoring", None)
print("cleared", [t for t in range(6) if monitoring and monitoring.get_tool(t) == "raydebug"],
      sys.gettrace(), flush=True)
"""


@pytest.fixture(scope="module", params=["3.10", "3.11", "3.12"])
def python(request: pytest.FixtureRequest) -> str:
    """3.11: this venv; 3.12: the Ray venv (built once); 3.10: a venv with debugpy only."""
    if request.param == "3.11":
        return sys.executable
    if request.param == "3.12":
        found = ray_venv(request.param)
    else:
        base = find_python(request.param)
        found = base and venv_with_debugpy(base)
        if found:  # raydebug comes through PYTHONPATH: its startup hook as an install has it
            site = subprocess.run([found, "-c", "import sysconfig; print(sysconfig.get_paths()"
                                   "['purelib'])"], capture_output=True, text=True, check=True)
            shutil.copy(SOURCE / "raydebug-startup.pth", site.stdout.strip())
    if not found:
        pytest.skip(f"Python {request.param} is not installed")
    return str(found)


def test_the_raised_filter_stops_once_per_raise(hub: HubProcess, tmp_path: Path,
                                                python: str) -> None:
    script = write_script(tmp_path, "job.py", JOB)
    raise_line = line_of(script, "raise line")

    async def scenario() -> None:
        ide = IdeLikeClient(hub)
        attach = await ide.open_cluster()
        parent = ide.parent
        assert parent is not None
        await parent.request("setExceptionBreakpoints", {"filters": ["raised"]})
        await parent.request("configurationDone")
        assert (await attach).success
        proc = subprocess.Popen([python, str(script)],
                                env=hub.env(RAYDEBUG_LIVE="1", PYTHONPATH=str(SOURCE)),
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)
        hub.workers.append(proc)  # stopped by pid at teardown
        assert proc.stdin is not None and proc.stdout is not None
        await asyncio.to_thread(hub.wait_linked, 1)
        proc.stdin.write("\n")
        proc.stdin.flush()
        try:
            for odd in (1, 3):
                child, _configuration, thread_id = await ide.next_child(60)
                [session] = await asyncio.to_thread(hub.get, "/api/sessions")
                assert (session["reason"], session["line"], session["exception"]) == (
                    "exception", raise_line, f"ValueError: odd {odd}"), session
                frames = await child.request("stackTrace", {"threadId": thread_id})
                top = frames["stackFrames"][0]
                assert (top["name"], top["line"]) == ("check", raise_line), top
                info = await child.request("exceptionInfo", {"threadId": thread_id})
                assert (info["exceptionId"], info["description"]) == (
                    "ValueError", f"odd {odd}"), info
                value = await child.request("evaluate", {
                    "expression": "i", "frameId": top["id"], "context": "repl"})
                assert value["result"] == str(odd)
                await child.request("disconnect", {})  # resumes the thread
                await child.close()
            line = await asyncio.wait_for(asyncio.to_thread(proc.stdout.readline), 60)
            assert line.split() == ["done", "2"], line
            assert len(ide.children) == 2
            await parent.request("setExceptionBreakpoints", {"filters": []})
            proc.stdin.write("\n")
            proc.stdin.flush()
            out, err = await asyncio.to_thread(proc.communicate, timeout=60)
            assert out.split() == ["cleared", "[]", "None"], err[-3000:]
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait(30)
                print(proc.stderr.read()[-3000:] if proc.stderr else "")
        await parent.close()

    run(scenario(), timeout=300)
