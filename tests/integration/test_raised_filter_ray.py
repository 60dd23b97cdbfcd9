"""The IDE's ``raised`` exception filter in a real multi-node Ray cluster (``Cluster`` on
loopback, 2 nodes), on Python 3.11 (this venv) and 3.12 (:func:`devtools.pythons.ray_venv`).

An IDE-like client sets ``raised`` on the hub's cluster session before the job; a task
(defined in the driver's ``__main__``, shipped by value) raises and catches a ``ValueError``
twice. Shown: it stops once per raise, each time as a child session with reason
``exception`` in the task's frame, the exception's text as pydevd gives it; the task goes on
and the job completes with both caught.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from devtools.ide import IdeLikeClient
from devtools.pythons import ray_venv
from helpers import HubProcess, line_of, run, write_script

pytest.importorskip("ray")
pytestmark = [pytest.mark.integration, pytest.mark.timeout(900)]

DRIVER = """
import os, sys, time
import ray
from ray.cluster_utils import Cluster

cluster = Cluster(initialize_head=True, head_node_args={
    "node_ip_address": "127.0.0.1", "include_dashboard": False, "num_cpus": 1})
cluster.add_node(node_ip_address="127.0.0.1", num_cpus=1)
cluster.wait_for_nodes()
link = {name: os.environ[name] for name in ("RAYDEBUG_HUB", "RAYDEBUG_TOKEN")}
ray.init(address=cluster.address, runtime_env={"env_vars": {**link, "RAYDEBUG_LIVE": "1"}})

def client_gone(agent):  # the next raise is ours to stop, not the leaving client's pydevd's
    agent.debugger.wait_untraced(10)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:  # and, on 3.11, our trace function is ours again
        if not agent._client_attached and (sys.version_info >= (3, 12) or getattr(
                sys.gettrace(), "raydebug_armed", False)):
            return
        time.sleep(0.01)
    raise RuntimeError("the client's session did not end within 30 s")

def armed_here(frame):  # this frame's raises stop: the filter is armed, not being armed
    if sys.version_info >= (3, 12):  # our tool's RAISE, a global event, is on
        monitoring = sys.monitoring
        return any(monitoring.get_tool(tool) == "raydebug"
                   and monitoring.get_events(tool) & monitoring.events.RAISE for tool in range(6))
    return getattr(frame.f_trace, "raydebug_armed", False)  # our local trace function

@ray.remote(num_cpus=0.25, max_retries=0)
def catcher():
    from raydebug.agent import get_agent
    agent = get_agent()
    # The hub's ArmBreakpoints reach a worker ms after its start; breakpoints.active() is
    # true as the install begins, before the install reaches this running frame.
    deadline = time.monotonic() + 60
    while not armed_here(sys._getframe()):
        if time.monotonic() > deadline:  # said, not run on unarmed to a 240 s wait
            raise RuntimeError("the raised filter was not armed in the task within 60 s")
        time.sleep(0.01)
    caught = 0
    for i in range(4):
        try:
            if i % 2:
                raise ValueError(f"odd {i}")  # raise line
        except ValueError:
            caught += 1
            client_gone(agent)
    return caught

print("caught", ray.get(catcher.remote()), flush=True)
ray.shutdown()
cluster.shutdown()
"""


@pytest.fixture(params=["3.11", "3.12"])
def python(request: pytest.FixtureRequest) -> str:
    if request.param == "3.11":
        return sys.executable
    found = ray_venv(request.param)
    if found is None:
        pytest.skip(f"Python {request.param} is not installed")
    return found


def test_a_ray_task_stops_once_per_raise(hub: HubProcess, tmp_path: Path, python: str):
    driver = write_script(tmp_path, "driver.py", DRIVER)
    raise_line = line_of(driver, "raise line")
    env = hub.ray_driver_env()

    async def scenario() -> None:
        ide = IdeLikeClient(hub)
        attach = await ide.open_cluster()
        parent = ide.parent
        assert parent is not None
        await parent.request("setExceptionBreakpoints", {"filters": ["raised"]})
        await parent.request("configurationDone")
        assert (await attach).success
        proc = subprocess.Popen([python, str(driver)], env=env, cwd=str(tmp_path),
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                start_new_session=True)
        try:
            for odd in (1, 3):
                child, _configuration, thread_id = await ide.next_child(240, while_running=proc)
                sessions = await asyncio.to_thread(hub.get, "/api/sessions")
                [session] = [s for s in sessions if s["state"] != "gone"]
                assert (session["reason"], session["function"], session["line"],
                        session["exception"]) == ("exception", "catcher", raise_line,
                                                  f"ValueError: odd {odd}"), session
                frames = await child.request("stackTrace", {"threadId": thread_id})
                top = frames["stackFrames"][0]
                value = await child.request("evaluate", {
                    "expression": "i", "frameId": top["id"], "context": "repl"})
                assert value["result"] == str(odd)
                info = await child.request("exceptionInfo", {"threadId": thread_id})
                assert (info["exceptionId"], info["description"]) == (
                    "ValueError", f"odd {odd}"), info
                await child.request("disconnect", {})  # resumes the task
                await child.close()
            out, err = await asyncio.to_thread(proc.communicate, timeout=180)
            assert "caught 2" in out, err[-3000:]
            assert len(ide.children) == 2
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)  # the driver and its cluster's processes
                await asyncio.to_thread(proc.wait, 30)
                print(proc.stderr.read()[-5000:] if proc.stderr else "")
            await parent.close()

    run(scenario(), timeout=800)
