"""A Ray job as one DAP session: the ranks of a job under `raydebug run`, grouped by
``job=``, in a client that refuses child sessions; its code shipped by ``working_dir`` and
shown at the client's checkout (``localRoot``)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from helpers import finish, line_of, read_line, run, write_script
from ray_cluster import LOOPBACK, raydebug_cli

pytest.importorskip("ray")
pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]

from raydebug.client.dap import DapClient  # noqa: E402

RAY_NODES = ({"num_cpus": 3},)  # the ``cluster`` fixture: the three ranks at once

JOB = """
import os
import sys
import ray

ray.init(address=sys.argv[1], runtime_env={"working_dir": os.path.dirname(__file__)})
print("job", ray.get_runtime_context().get_job_id(), flush=True)
from ranks import train_step

refs = [ray.remote(num_cpus=1)(train_step).options(
            runtime_env={"env_vars": {"RANK": str(rank)}}).remote(rank) for rank in range(3)]
print("results", sorted(loss for _, loss in ray.get(refs)), flush=True)
"""

RANKS = """
import os

def train_step(rank):
    loss = rank * 0.5
    breakpoint()  # pause here
    loss += 1  # stopped here first
    return os.getpid(), loss  # the next line
"""


def test_the_ranks_of_a_ray_job_are_one_session_and_step_together(cluster: Any,
                                                                   tmp_path: Path):
    code = tmp_path / "code"  # shipped: the workers run it from a _ray_pkg_ directory
    code.mkdir()
    job_file = write_script(code, "job.py", JOB)
    ranks_file = write_script(code, "ranks.py", RANKS)
    driver = subprocess.Popen(
        [sys.executable, "-m", "raydebug", "run", "--", sys.executable, str(job_file),
         cluster.address],
        env={**os.environ, **LOOPBACK, "PYTHONUNBUFFERED": "1", "RAYDEBUG_WAIT_TIMEOUT": "180"},
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        line = ""
        while not line.startswith("job "):  # Ray's own lines may come first
            line = read_line(driver, timeout=120)
            assert line or driver.poll() is None, driver.communicate()[1][-3000:]
        job = line.split()[1]
        listed = raydebug_cli("list", "--ray-address", cluster.address, "--json", "--wait",
                              "3", "--timeout", "150")
        assert listed.returncode == 0, listed.stderr
        port = int(json.loads(raydebug_cli("vscode", "--ray-address",
                                           cluster.address).stdout)["connect"]["port"])

        async def scenario() -> None:
            client = await DapClient.connect("127.0.0.1", port)
            await client.initialize(supportsStartDebuggingRequest=False)
            attach = client.send_request("attach", {"name": "job", "raydebug": {
                "group": f"job={job}", "stepTogether": True, "localRoot": str(code)}})
            await client.wait_event("initialized")
            assert (await attach).success
            await client.request("configurationDone")
            stops = [await client.wait_event("stopped", timeout=60) for _ in range(3)]
            names = [t["name"] for t in (await client.request("threads"))["threads"]]
            ranks = {int(match.group(1)): int(match.group(2)) for name in names
                     if (match := re.match(r"rank (\d) · train_step · pid (\d+) · MainThread",
                                           name))}
            assert sorted(ranks) == [0, 1, 2], names
            assert sum("pid" in name for name in names) > 6  # the driver runs: its threads too
            for stop in stops:
                top = (await client.request("stackTrace", {
                    "threadId": stop.body["threadId"]}))["stackFrames"][0]
                assert top["source"]["path"] == str(ranks_file)  # not the shipped copy's
                pid, rank = (await client.request("evaluate", {
                    "expression": "(os.getpid(), rank)", "frameId": top["id"],
                    "context": "repl"}))["result"].strip("()").split(", ")
                assert ranks[int(rank)] == int(pid)
            await client.request("next", {"threadId": stops[0].body["threadId"]})
            for stop in stops:  # every rank stepped, one next
                await client.wait_event("stopped", timeout=30, threadId=stop.body["threadId"])
                top = (await client.request("stackTrace", {
                    "threadId": stop.body["threadId"]}))["stackFrames"][0]
                assert top["line"] == line_of(ranks_file, "the next line")
            go = await client.request("continue", {"threadId": stops[0].body["threadId"]})
            assert go["allThreadsContinued"] is True and client.reverse_requests == []
            await client.request("disconnect", {})
            await client.close()

        run(scenario(), timeout=180)
        code, out, err = finish(driver, timeout=120)
        assert code == 0 and "results [1.0, 1.5, 2.0]" in out, err[-3000:]
    finally:
        if driver.poll() is None:
            driver.kill()
            driver.wait(30)
