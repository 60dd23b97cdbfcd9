"""Cluster breakpoints in a real multi-node Ray cluster all on Python 3.12 (``sys.monitoring``).

The driver runs in a 3.12 venv with this venv's Ray (:func:`devtools.pythons.ray_venv`):
``ray.cluster_utils.Cluster`` on loopback, 2 nodes, its workers linked to a real hub (this
venv's, 3.11) from their start (``RAYDEBUG_LIVE=1`` in the job's runtime env). An IDE-like
client attaches to the hub's cluster session before the job and sets a conditional breakpoint
on a line of a task. Shown, in one job:

- armed but elsewhere: a worker (an actor) that has the breakpoint's file loaded and runs
  call-heavy code of another file has our ``sys.monitoring`` tool with ``PY_START`` as its
  only global event, local events on the code objects of the breakpoint's file and on no
  other code, and its callbacks are not called again for that other code (counted); no trace
  function, no pydevd;
- the one task with ``i == 3`` (of tasks spread over both nodes) stops at the line, as a
  child session; its locals are read; continue; the job completes;
- the IDE clears its breakpoints: the same worker has no tool, no events, nothing left.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
from pathlib import Path

import pytest

from devtools.ide import IdeLikeClient
from devtools.pythons import ray_venv
from helpers import HubProcess, line_of, run, write_script

pytestmark = [pytest.mark.integration, pytest.mark.timeout(900)]

TARGET = """
def square(i):
    value = i * i  # breakpoint line
    return value

def loaded():
    return True
"""

ELSEWHERE = """
def fib(n):
    return n if n < 2 else fib(n - 1) + fib(n - 2)
"""

DRIVER = """
import gc, json, os, sys, time, types
import ray
from ray.cluster_utils import Cluster

cluster = Cluster(initialize_head=True, head_node_args={
    "node_ip_address": "127.0.0.1", "include_dashboard": False, "num_cpus": 1})
cluster.add_node(node_ip_address="127.0.0.1", num_cpus=1)
cluster.wait_for_nodes()
link = {name: os.environ[name] for name in ("RAYDEBUG_HUB", "RAYDEBUG_TOKEN", "PYTHONPATH")}
ray.init(address=cluster.address, runtime_env={"env_vars": {**link, "RAYDEBUG_LIVE": "1"}})
import target

def wait_armed(armed):
    # The hub's ArmBreakpoints reach a worker ms after its start, over its link: this hub is
    # the test's, which publishes nothing in the cluster's KV for a worker to arm from before
    # its first task (the cluster's own hub does), so a task waits, bounded (under a loaded
    # full suite square(3) ran before its worker was armed, and never stopped).
    from raydebug.agent import get_agent
    agent = get_agent()
    for _ in range(3000):
        if agent.breakpoints.active() == armed:
            return
        time.sleep(0.01)

@ray.remote(num_cpus=0.25, scheduling_strategy="SPREAD")
def square(i):
    wait_armed(True)
    return target.square(i)

@ray.remote(num_cpus=0)
class Probe:
    def report(self, armed):
        import elsewhere, target
        from raydebug.agent import get_agent
        from raydebug.agent.armed import monitoring as armed_monitoring
        wait_armed(armed)
        agent = get_agent()
        target.loaded()  # code of the breakpoint's file has run here
        elsewhere.fib(15)
        m = sys.monitoring
        tools = [t for t in range(6) if m.get_tool(t) == armed_monitoring.TOOL_NAME]
        calls = 0
        if tools:
            py_start = m.register_callback(tools[0], m.events.PY_START, None)
            def counting(code, offset):
                nonlocal calls
                calls += 1
                return py_start(code, offset)
            m.register_callback(tools[0], m.events.PY_START, counting)
            elsewhere.fib(20)  # 21,891 calls: none of them reaches us
            m.register_callback(tools[0], m.events.PY_START, py_start)
        codes = {f.__code__ for f in gc.get_objects() if isinstance(f, types.FunctionType)}
        return {
            "version": list(sys.version_info[:2]), "tools": tools,
            "global": [m.get_events(t) for t in tools],
            "local": sorted({c.co_filename for c in codes for t in tools
                             if m.get_local_events(t, c)}),
            "callbacks for elsewhere": calls,
            "gettrace": repr(sys.gettrace()),
            "pydevd": "pydevd" in sys.modules or "debugpy" in sys.modules,
        }

probe = Probe.remote()
print("report", json.dumps(ray.get(probe.report.remote(True))), flush=True)
print("results", ray.get([square.remote(i) for i in range(6)]), flush=True)
input()  # the test says when the IDE has cleared its breakpoints
print("report", json.dumps(ray.get(probe.report.remote(False))), flush=True)
ray.shutdown()
cluster.shutdown()
"""


@pytest.fixture(scope="module")
def python312() -> str:
    python = ray_venv("3.12")
    if python is None:
        pytest.skip("Python 3.12 is not installed")
    return python


def test_a_breakpoint_on_a_312_ray_cluster_and_armed_elsewhere(
        hub: HubProcess, tmp_path: Path, python312: str) -> None:
    code = tmp_path / "code"
    code.mkdir()
    target = write_script(code, "target.py", TARGET)
    write_script(code, "elsewhere.py", ELSEWHERE)
    driver = write_script(tmp_path, "driver.py", DRIVER)
    line = line_of(target, "breakpoint line")
    env = hub.ray_driver_env(PYTHONPATH=str(code))

    async def scenario() -> None:
        ide = IdeLikeClient(hub)
        attach = await ide.open_cluster()
        parent = ide.parent
        assert parent is not None
        await parent.request("setBreakpoints", {"source": {"path": str(target)},
                                                "breakpoints": [
            {"line": line, "condition": "i == 3"}]})
        await parent.request("configurationDone")
        assert (await attach).success
        proc = subprocess.Popen([python312, str(driver)], env=env, cwd=str(tmp_path),
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True, start_new_session=True)
        assert proc.stdin is not None and proc.stdout is not None

        async def printed(word: str) -> str:
            while True:
                text = await asyncio.wait_for(asyncio.to_thread(proc.stdout.readline), 300)
                if not text:
                    raise AssertionError(f"the driver ended before {word!r}")
                if text.startswith(word + " "):
                    return text.split(" ", 1)[1]

        try:
            armed = json.loads(await printed("report"))
            assert armed["version"] == [3, 12]
            assert len(armed["tools"]) == 1, armed
            assert armed["global"] == [1], armed  # sys.monitoring.events.PY_START only
            assert armed["local"] == [str(target)], armed
            assert armed["callbacks for elsewhere"] == 0, armed
            assert (armed["gettrace"], armed["pydevd"]) == ("None", False), armed

            child, _configuration, thread_id = await ide.next_child(240, while_running=proc)
            frames = await child.request("stackTrace", {"threadId": thread_id})
            top = frames["stackFrames"][0]
            assert (top["name"], top["line"], top["source"]["path"]) == (
                "square", line, str(target)), top
            value = await child.request("evaluate", {
                "expression": "i", "frameId": top["id"], "context": "repl"})
            assert value["result"] == "3"
            await child.request("continue", {"threadId": thread_id})
            await child.request("disconnect", {})
            await child.close()
            assert (await printed("results")).split() == [
                "[0,", "1,", "4,", "9,", "16,", "25]"]
            assert len(ide.children) == 1

            await parent.request("setBreakpoints", {"source": {"path": str(target)},
                                                    "breakpoints": []})
            proc.stdin.write("\n")
            proc.stdin.flush()
            cleared = json.loads(await printed("report"))
            assert (cleared["tools"], cleared["local"], cleared["gettrace"]) == (
                [], [], "None"), cleared
            _out, err = await asyncio.to_thread(proc.communicate, timeout=120)
            assert proc.returncode == 0, err[-3000:]
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)  # the driver and its cluster's processes
                await asyncio.to_thread(proc.wait, 30)
                print(proc.stderr.read()[-5000:] if proc.stderr else "")
            await parent.close()

    run(scenario(), timeout=800)
