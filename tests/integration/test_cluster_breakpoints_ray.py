"""Editor breakpoints in a real multi-node Ray job (ray.cluster_utils.Cluster on loopback):
an IDE-like client attaches to the cluster's hub *before* the job, sets a conditional
breakpoint on a line of a task; the job, with no ``breakpoint()``, runs under ``raydebug
run``; the one worker that reaches the line with ``i == 3`` stops there as a child session;
its locals are read; continue; the job completes. Twice: a task defined in the driver's
``__main__`` (shipped by value, so the driver's path is in the workers' ``co_filename``),
and one in a module shipped with ``working_dir`` (its path under Ray's directory on each
node, mapped through the IDE's ``localRoot``). On 3.10/3.11 the stopping worker is armed
through rewritten code (agent/armed/code.py: an import, or cloudpickle's rebuild of a function
shipped by value), asserted through its agent's modes."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from devtools.ide import IdeLikeClient
from helpers import HubProcess, line_of, run
from ray_cluster import LOOPBACK, hub_port

pytest.importorskip("ray")
pytestmark = [pytest.mark.integration, pytest.mark.timeout(600)]

from raydebug.client.dap import DapClient  # noqa: E402

# One two-node cluster for the module (the ``cluster`` fixture): each test runs its own job,
# and its IDE's breakpoints leave the cluster's set when the IDE's connection closes.
RAY_NODES = ({"num_cpus": 1}, {"num_cpus": 1})

JOB = """
import sys, time
import ray

ray.init(address=sys.argv[1])  # knows nothing of raydebug: `raydebug run` enables it

@ray.remote(num_cpus=0.25)
def square(i):
    # A worker links to the hub as it starts and is armed ms later; a task that started
    # meanwhile is still stopped in (its running frame is armed too), but not at a line
    # it has passed already.
    time.sleep(0.5)
    value = i * i  # breakpoint line
    return value

print("results", ray.get([square.remote(i) for i in range(8)]), flush=True)
"""


WORKING_DIR_JOB = """
import sys
import ray

ray.init(address=sys.argv[1], runtime_env={"working_dir": sys.argv[2]})

@ray.remote(num_cpus=0.25)
def square(i):
    import tasks  # the node's copy of the working_dir (the driver does not import it)
    return tasks.square(i)

print("results", ray.get([square.remote(i) for i in range(8)]), flush=True)
"""

TASKS = """
import time

def square(i):
    time.sleep(0.5)  # see JOB
    value = i * i  # breakpoint line
    return value
"""


def test_a_breakpoint_set_before_the_job_stops_the_matching_task(cluster: Any, tmp_path: Path):
    job = tmp_path / "job.py"
    job.write_text(JOB)
    stop_and_continue(cluster, job, job, {})


def test_a_breakpoint_in_working_dir_code_maps_through_the_local_root(cluster: Any,
                                                                      tmp_path: Path):
    checkout = tmp_path / "checkout"
    checkout.mkdir()
    job, tasks = tmp_path / "job.py", checkout / "tasks.py"
    job.write_text(WORKING_DIR_JOB)
    tasks.write_text(TASKS)
    stop_and_continue(cluster, job, tasks, {"raydebug": {"localRoot": str(checkout)}},
                      str(checkout))


def stop_and_continue(cluster: Any, job: Path, source: Path,
                      attach_arguments: dict[str, object], *job_args: str) -> None:
    """The IDE attaches with ``attach_arguments``, sets ``i == 3`` on ``source``'s
    breakpoint line, the job runs; the child's top frame is that line in the checkout."""
    line = line_of(source, "breakpoint line")
    port = hub_port(cluster.address)  # starts the cluster's hub: the IDE is first
    hub = HubProcess(None, ("127.0.0.1", port), ("", 0), "")  # type: ignore[arg-type]
    env = {**os.environ, **LOOPBACK, "PYTHONUNBUFFERED": "1"}

    async def scenario() -> None:
        ide = IdeLikeClient(hub)
        parent = ide.parent = await DapClient.connect("127.0.0.1", port)
        await parent.initialize(supportsStartDebuggingRequest=True)
        attach = parent.send_request("attach", {"name": "cluster", "connect": {
            "host": "127.0.0.1", "port": port}, **attach_arguments})
        await parent.wait_event("initialized")
        await parent.request("setBreakpoints", {"source": {"path": str(source)},
                                                "breakpoints": [
            {"line": line, "condition": "i == 3"}]})
        await parent.request("configurationDone")
        assert (await attach).success
        driver = await asyncio.to_thread(
            subprocess.Popen,
            [sys.executable, "-m", "raydebug", "run", "--", sys.executable, str(job),
             cluster.address, *job_args], env=env, stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, text=True, cwd=str(job.parent))
        try:
            child, _configuration, thread_id = await ide.next_child(240, while_running=driver)
            [session] = await asyncio.to_thread(hub.get, "/api/sessions")
            shipped = "working_dir_files" in session["file"]  # the node's own copy
            assert shipped == bool(attach_arguments), session["file"]
            frames = await child.request("stackTrace", {"threadId": thread_id})
            top = frames["stackFrames"][0]
            assert (top["name"], top["line"], top["source"]["path"]) == (
                "square", line, str(source)), top  # mapped back to the checkout
            value = await child.request("evaluate", {
                "expression": "i", "frameId": top["id"], "context": "repl"})
            assert value["result"] == "3"
            if sys.version_info < (3, 12):  # armed through rewritten code, untraced
                modes = await child.request("evaluate", {
                    "expression": "sorted(set(__import__('raydebug.agent', fromlist=['_'])"
                                  ".get_agent().breakpoints.modes().values()))",
                    "frameId": top["id"], "context": "repl"})
                assert modes["result"] == "['rewrite']", modes
            await child.request("continue", {"threadId": thread_id})
            await child.request("disconnect", {})
            await child.close()
            out, err = await asyncio.to_thread(driver.communicate, timeout=180)
            assert "results [0, 1, 4, 9, 16, 25, 36, 49]" in out, err[-3000:]
            # The driver asks its own identities as the breakpoints arrive: Ray warns
            # at each ask of a driver's task.
            assert "only available when the process is a worker" not in err, err[-3000:]
        finally:
            if driver.poll() is None:
                driver.kill()
                await asyncio.to_thread(driver.wait, 30)
            await parent.close()

    run(scenario(), timeout=400)


LOGGING_JOB = """
import sys, time
import ray

ray.init(address=sys.argv[1])

@ray.remote(num_cpus=0.25)
def cube(i):
    time.sleep(0.5)  # see JOB
    return i ** 3  # logpoint line

print("results", sum(ray.get([cube.remote(i) for i in range(20)])), flush=True)
"""


def test_a_logpoint_in_a_task_run_20_times_logs_20_lines_and_never_pauses(cluster: Any,
                                                                         tmp_path: Path):
    job = tmp_path / "job.py"
    job.write_text(LOGGING_JOB)
    line = line_of(job, "logpoint line")
    port = hub_port(cluster.address)
    env = {**os.environ, **LOOPBACK, "PYTHONUNBUFFERED": "1"}

    async def scenario() -> list[str]:
        parent = await DapClient.connect("127.0.0.1", port)
        await parent.initialize(supportsStartDebuggingRequest=True)
        attach = parent.send_request("attach", {"name": "cluster"})
        await parent.wait_event("initialized")
        await parent.request("setBreakpoints", {"source": {"path": str(job)},
                                                "breakpoints": [
            {"line": line, "logMessage": "cube of {i} is {i ** 3}"}]})
        await parent.request("configurationDone")
        assert (await attach).success
        driver = await asyncio.to_thread(
            subprocess.run,
            [sys.executable, "-m", "raydebug", "run", "--", sys.executable, str(job),
             cluster.address], env=env, capture_output=True, text=True, timeout=300)
        assert f"results {sum(i ** 3 for i in range(20))}" in driver.stdout, \
            driver.stderr[-3000:]
        texts = [(await parent.wait_event("output", timeout=30)).body["output"]
                 for _ in range(20)]
        assert parent.reverse_requests == []  # never a child: nothing paused
        await parent.close()
        return texts

    texts = run(scenario(), timeout=400)
    assert sorted(t.split("] ", 1)[1] for t in texts) == sorted(
        f"cube of {i} is {i ** 3}\n" for i in range(20))
    assert all(t.startswith("[cube, pid ") for t in texts), texts[:3]


FAILING_JOB = """
import sys
import ray

ray.init(address=sys.argv[1])

@ray.remote(num_cpus=0.25, max_retries=0)
def divide(i):
    return 1 / i

try:
    ray.get(divide.remote(0))
except Exception as error:
    print("failed", type(error.cause).__name__, flush=True)
"""


def test_the_ides_uncaught_filter_freezes_a_failing_task_cluster_wide(cluster: Any,
                                                                     tmp_path: Path):
    job = tmp_path / "job.py"
    job.write_text(FAILING_JOB)
    port = hub_port(cluster.address)
    hub = HubProcess(None, ("127.0.0.1", port), ("", 0), "")  # type: ignore[arg-type]
    env = {**os.environ, **LOOPBACK, "PYTHONUNBUFFERED": "1"}
    env.pop("RAYDEBUG_POST_MORTEM", None)

    async def scenario() -> None:
        ide = IdeLikeClient(hub)
        parent = ide.parent = await DapClient.connect("127.0.0.1", port)
        await parent.initialize(supportsStartDebuggingRequest=True)
        attach = parent.send_request("attach", {"name": "cluster", "connect": {
            "host": "127.0.0.1", "port": port}})
        await parent.wait_event("initialized")
        await parent.request("setExceptionBreakpoints", {"filters": ["uncaught"]})
        await parent.request("configurationDone")
        assert (await attach).success
        driver = await asyncio.to_thread(
            subprocess.Popen,  # no --post-mortem: the IDE's filter asks for it
            [sys.executable, "-m", "raydebug", "run", "--", sys.executable, str(job),
             cluster.address], env=env, stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, text=True)
        try:
            child, _configuration, thread_id = await ide.next_child(240, while_running=driver)
            [session] = await asyncio.to_thread(hub.get, "/api/sessions")
            assert (session["reason"], session["function"]) == ("exception", "divide")
            await child.request("continue", {"threadId": thread_id})
            await child.request("disconnect", {})
            await child.close()
            out, err = await asyncio.to_thread(driver.communicate, timeout=180)
            assert "failed ZeroDivisionError" in out, err[-3000:]
        finally:
            if driver.poll() is None:
                driver.kill()
                await asyncio.to_thread(driver.wait, 30)
            await parent.close()

    run(scenario(), timeout=400)

