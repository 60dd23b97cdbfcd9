"""Editor breakpoints in a real multi-node Ray job (ray.cluster_utils.Cluster on loopback):
an IDE-like client attaches to the cluster's hub *before* the job, sets a conditional
breakpoint on a line of a task defined in the driver's ``__main__`` (shipped by value, so
the driver's path is in the workers' ``co_filename``); the job, with no ``breakpoint()``,
runs under ``raydebug run``; the one worker that reaches the line with ``i == 3`` stops
there as a child session; its locals are read; continue; the job completes."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from pathlib import Path

import pytest
from test_cluster_session import IdeLikeClient
from test_live_ray import hub_port

from helpers import HubProcess, line_of, run
from ray_cluster import LOOPBACK, loopback_cluster

pytest.importorskip("ray")
pytestmark = [pytest.mark.integration, pytest.mark.timeout(600)]

from raydebug.client.dap import DapClient  # noqa: E402

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


def test_a_breakpoint_set_before_the_job_stops_the_matching_task(tmp_path: Path):
    job = tmp_path / "job.py"
    job.write_text(JOB)
    line = line_of(job, "breakpoint line")
    with loopback_cluster({"num_cpus": 1}, {"num_cpus": 1}) as cluster:
        port = hub_port(cluster.address)  # starts the cluster's hub: the IDE is first
        hub = HubProcess(None, ("127.0.0.1", port), ("", 0), "")  # type: ignore[arg-type]
        env = {**os.environ, **LOOPBACK, "PYTHONUNBUFFERED": "1"}

        async def scenario() -> str:
            ide = IdeLikeClient(hub)
            parent = ide.parent = await DapClient.connect("127.0.0.1", port)
            await parent.initialize(supportsStartDebuggingRequest=True)
            attach = parent.send_request("attach", {"name": "cluster", "connect": {
                "host": "127.0.0.1", "port": port}})
            await parent.wait_event("initialized")
            await parent.request("setBreakpoints", {"source": {"path": str(job)},
                                                    "breakpoints": [
                {"line": line, "condition": "i == 3"}]})
            await parent.request("configurationDone")
            assert (await attach).success
            driver = await asyncio.to_thread(
                subprocess.Popen,
                [sys.executable, "-m", "raydebug", "run", "--", sys.executable, str(job),
                 cluster.address], env=env, stdout=subprocess.PIPE,
                stderr=subprocess.PIPE, text=True)
            try:
                child, _configuration, thread_id = await asyncio.wait_for(
                    ide.next_child(), 240)
                frames = await child.request("stackTrace", {"threadId": thread_id})
                top = frames["stackFrames"][0]
                assert (top["name"], top["line"]) == ("square", line), top
                value = await child.request("evaluate", {
                    "expression": "i", "frameId": top["id"], "context": "repl"})
                assert value["result"] == "3"
                await child.request("continue", {"threadId": thread_id})
                await child.request("disconnect", {})
                await child.close()
                out, err = await asyncio.to_thread(driver.communicate, timeout=180)
                assert "results [0, 1, 4, 9, 16, 25, 36, 49]" in out, err[-3000:]
                return str(out)
            finally:
                if driver.poll() is None:
                    driver.kill()
                    await asyncio.to_thread(driver.wait, 30)
                await parent.close()

        run(scenario(), timeout=400)
