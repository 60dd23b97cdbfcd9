"""A process forked after its parent was debugged is a session of its own (no Ray here:
tests/integration/test_ray_children.py has the Ray cases)."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from devtools.pythons import python_for
from helpers import (
    HubProcess,
    attach,
    evaluate_and_continue,
    finish,
    run,
    write_script,
)

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]

SOURCE = Path(__file__).resolve().parents[2] / "src"

# The parent pauses and is debugged (its agent, link thread and pydevd exist), then forks a
# child that pauses in turn.
FORKING = """
import multiprocessing, os, sys

def child(queue):
    in_child = os.getpid() * 10
    breakpoint()  # pause in the child
    queue.put(in_child)

in_parent = 1
breakpoint()  # pause in the parent
context = multiprocessing.get_context("fork")
queue = context.Queue()
worker = context.Process(target=child, args=(queue,))
worker.start()
result = queue.get(timeout=120)
worker.join(timeout=60)
print("child", worker.pid, "gave", result, "exit", worker.exitcode, flush=True)
"""


async def debug(hub: HubProcess, session: dict[str, object], expression: str) -> str:
    """Attach to ``session``, evaluate ``expression`` in its frame, continue."""
    return (await evaluate_and_continue(*hub.client, str(session["id"]), expression)).result


@pytest.fixture(scope="module", params=["this", "3.12", "3.13"])
def python(request: pytest.FixtureRequest) -> str:
    """This interpreter, 3.12 and 3.13 (pydevd traces with sys.monitoring there: its fork reset
    differs) in a venv with only debugpy; raydebug comes from the source tree. The venv is
    the one every test of that version uses (devtools.pythons.python_for): a base of another
    name (``python3`` beside ``python3.12``) made it be built again under the running tests."""
    if request.param == "this":
        return sys.executable
    return python_for(request.param)


def test_a_fork_child_of_a_debugged_process_is_its_own_session(hub: HubProcess, python: str,
                                                                tmp_path: Path):
    script = write_script(tmp_path, "forking.py", FORKING)
    proc = subprocess.Popen([python, str(script)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True,
                            env=hub.env(RAYDEBUG_WAIT_TIMEOUT="120", PYTHONPATH=str(SOURCE)))
    hub.workers.append(proc)
    try:
        check_forking(hub, proc)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)  # the child too, if a failure left it


def check_forking(hub: HubProcess, proc: subprocess.Popen[str]) -> None:
    [parent] = hub.wait_sessions(1)
    if parent["pid"] != proc.pid:  # its own breakpoint() was not listed: say what it said
        proc.kill()
        pytest.fail(f"the first session is pid {parent['pid']}'s, not the parent's "
                    f"({proc.pid}); the parent said: {proc.communicate()[1][-3000:]}")

    async def scenario() -> int:
        # The parent's client stays attached while it forks: the forking thread is traced
        # by the parent's pydevd, whose sockets the child inherits.
        client, stopped = await attach(*hub.client, str(parent["id"]))
        frames = await client.request("stackTrace", {"threadId": stopped["threadId"]})
        value = await client.request("evaluate", {
            "expression": "in_parent", "frameId": frames["stackFrames"][0]["id"],
            "context": "repl"})
        assert value["result"] == "1"
        await client.request("continue", {"threadId": stopped["threadId"]})
        # The parent's session goes on (its client is attached); the child's joins it.
        sessions = await asyncio.to_thread(hub.wait_sessions, 2, 60)
        [child] = [s for s in sessions if s["pid"] != proc.pid]
        assert child["function"] == "child"
        assert await debug(hub, child, "in_child") == str(child["pid"] * 10)
        await client.request("disconnect", {})
        await client.close()
        return int(child["pid"])

    try:
        child_pid = run(scenario(), timeout=120)
    except Exception:
        proc.kill()
        pytest.fail(f"the scenario failed; the process said: {proc.communicate()[1][-3000:]}")
    code, out, err = finish(proc, timeout=60)
    assert code == 0, err
    assert f"child {child_pid} gave {child_pid * 10} exit 0" in out
    # CPython 3.13.0 (not 3.12, not a plain pause on 3.13.0) reports an ignored TypeError
    # from threading's dummy-thread cleanup as the forking parent shuts down: noise, exit 0.
    noise = "Exception ignored in: <function _DeleteDummyThreadOnDel.__del__"
    assert "Traceback" not in err.split(noise)[0], err
