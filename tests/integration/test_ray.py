"""raydebug on a real 3-node Ray cluster (ray.cluster_utils.Cluster, all on loopback)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from helpers import evaluate_and_continue, finish, listening_ports, run, stop, write_script
from ray_cluster import LOOPBACK, raydebug_cli

pytest.importorskip("ray")
pytestmark = [pytest.mark.integration, pytest.mark.timeout(600)]

from raydebug.client.dap import DapClient  # noqa: E402

JOB = """
import asyncio, sys, threading
import ray

ray.init(address=sys.argv[1])  # knows nothing of raydebug: `raydebug run` enables it

@ray.remote(num_cpus=0, resources={"on_head": 1})
def on_head(x):
    local = x + 1
    breakpoint()  # pause here
    return local

@ray.remote(num_cpus=0, resources={"on_node1": 1})
def on_node1(x):
    local = x + 1
    breakpoint()  # pause here
    return local

@ray.remote(num_cpus=0, resources={"on_node2": 1})
def on_node2(x):
    local = x + 1
    breakpoint()  # pause here
    return local

@ray.remote(num_cpus=0, max_concurrency=2)
class Threaded:
    def work(self, x):
        local = x * 2
        breakpoint()  # pause here
        return local

@ray.remote(num_cpus=0)
class Asynchronous:
    async def work(self, x):
        local = x * 3
        await asyncio.sleep(0)
        breakpoint()  # pause here
        return local

@ray.remote(num_cpus=0, max_retries=0)
def fails(x):
    local = x
    raise ValueError(f"task failed on purpose with {local}")

threaded, asynchronous = Threaded.remote(), Asynchronous.remote()
refs = [on_head.remote(1), on_node1.remote(2), on_node2.remote(3),
        threaded.work.remote(4), asynchronous.work.remote(5)]
failing = fails.remote(6)
print("results", ray.get(refs), flush=True)
try:
    ray.get(failing)
except ray.exceptions.RayTaskError as error:
    print("driver got:", type(error.cause).__name__, error.cause, flush=True)
driver_local = "in the driver"
breakpoint()  # the driver pauses too (no terminal: a session)
print("job done", flush=True)
"""

EXPECTED_TASKS = {"on_head", "on_node1", "on_node2", "Threaded.work", "Asynchronous.work",
                  "fails"}


# The module's cluster (the ``cluster`` fixture): head + 2 worker nodes, each with a resource
# to pin tasks to it.
RAY_NODES = ({"num_cpus": 1, "resources": {"on_head": 1}},
             {"num_cpus": 1, "resources": {"on_node1": 1}},
             {"num_cpus": 1, "resources": {"on_node2": 1}})


def hub_processes(cluster: Any) -> list[int]:
    """Pids of this cluster's processes running the hub actor (Ray titles them
    ray::_HubActor): children of one of its raylets, so other clusters on the machine (other
    test runs) do not count."""
    raylets = {str(node.all_processes["raylet"][0].process.pid)
               for node in cluster.list_all_nodes()}
    pids = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if b"_HubActor" not in (entry / "cmdline").read_bytes():
                    continue
                parent = (entry / "stat").read_text().rsplit(")", 1)[1].split()[1]
            except (OSError, IndexError):
                continue
            if parent in raylets:
                pids.append(int(entry.name))
    return pids


def test_breakpoints_and_post_mortem_across_the_cluster(cluster: Any, tmp_path: Path):
    job = write_script(tmp_path, "job.py", JOB)
    env = {**os.environ, **LOOPBACK, "RAYDEBUG_POST_MORTEM": "1",
           "RAYDEBUG_WAIT_TIMEOUT": "300", "PYTHONUNBUFFERED": "1"}
    driver = subprocess.Popen(
        [sys.executable, "-m", "raydebug", "run", "--", sys.executable, str(job),
         cluster.address], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        listed = raydebug_cli("list", "--ray-address", cluster.address, "--json",
                              "--wait", "6", "--timeout", "240")
        assert listed.returncode == 0, listed.stderr
        sessions = json.loads(listed.stdout)
        assert {s["task_name"] for s in sessions} == EXPECTED_TASKS, sessions
        assert len(hub_processes(cluster)) == 1  # six workers paused at once: one hub
        by_task = {s["task_name"]: s for s in sessions}
        node_of = {"on_head": cluster.head_node.node_id,
                   **{name: node.node_id for name, node in zip(
                       ("on_node1", "on_node2"),
                       sorted(cluster.worker_nodes, key=lambda n: n.node_id), strict=True)}}
        assert by_task["on_head"]["node_id"] == node_of["on_head"]
        assert {by_task["on_node1"]["node_id"], by_task["on_node2"]["node_id"]} == {
            n.node_id for n in cluster.worker_nodes}
        assert len({s["job_id"] for s in sessions}) == 1
        assert by_task["Threaded.work"]["actor_class"] == "Threaded"
        assert by_task["Asynchronous.work"]["actor_class"] == "Asynchronous"
        assert by_task["Threaded.work"]["actor_id"]
        assert by_task["on_head"]["actor_id"] is None and by_task["on_head"]["attempt"] == 0
        assert by_task["fails"]["reason"] == "exception"
        assert by_task["fails"]["exception"] == "ValueError: task failed on purpose with 6"
        for session in sessions:
            # A Ray worker listens for Ray's own RPCs on one port; a worker paused by Ray's
            # built-in debugger listens on a second one, debugpy's. Ours adds none.
            ports = listening_ports(session["pid"])
            assert len(ports) <= 1, (session["task_name"], ports)

        hub = raydebug_cli("vscode", "--ray-address", cluster.address)
        port = json.loads(hub.stdout)["connect"]["port"]

        async def debug_each() -> None:
            for session in sessions:
                seen = await evaluate_and_continue("127.0.0.1", port, session["id"], "local",
                                                   timeout=60)
                assert Path(seen.top["source"]["path"]).name == "job.py"
                assert seen.result.isdigit()
                if session["reason"] == "exception":
                    assert seen.stopped["reason"] == "exception"

        run(debug_each(), timeout=300)

        driver_session = raydebug_cli("list", "--ray-address", cluster.address, "--json",
                                      "--wait", "1", "--timeout", "120")
        [paused_driver] = json.loads(driver_session.stdout)
        assert paused_driver["pid"] == driver.pid and paused_driver["task_id"] is None

        async def release_driver() -> None:
            client = await DapClient.connect("127.0.0.1", port)
            await client.initialize()
            await client.attach(paused_driver["id"], timeout=60)
            await client.request("disconnect", {})
            await client.close()

        run(release_driver())
        code, out, err = finish(driver, timeout=180)
        assert code == 0, err[-3000:]
        assert "results [2, 3, 4, 8, 15]" in out
        assert "driver got: ValueError task failed on purpose with 6" in out
        assert "job done" in out
    finally:
        stop(driver)


SIMPLE_JOB = """
import sys, ray
ray.init(address=sys.argv[1])

@ray.remote(num_cpus=0)
def pause(x):
    breakpoint()
    return x

print("result", ray.get(pause.remote(1)), flush=True)
"""


def test_an_explicit_hub_takes_precedence_and_a_killed_job_ends_its_session(
        cluster: Any, tmp_path: Path):
    from helpers import HubProcess, read_line

    hub_proc = subprocess.Popen(
        [sys.executable, "-m", "raydebug", "hub", "--ray-address", cluster.address,
         "--port", "0", "--agent-port", "0", "--token", "explicit-token"],
        env={**os.environ, **LOOPBACK, "XDG_STATE_HOME": str(tmp_path / "state")},
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    driver = None
    try:
        words = read_line(hub_proc, timeout=60).split()
        host, port = words[4].rsplit(":", 1)
        whost, wport = words[6].rsplit(":", 1)
        hub = HubProcess(hub_proc, (host, int(port)), (whost, int(wport)), "explicit-token")
        assert json.loads(raydebug_cli("vscode", "--ray-address", cluster.address).stdout)[
            "connect"]["port"] == int(port)  # the CLI finds the explicit hub

        job = write_script(tmp_path, "job.py", SIMPLE_JOB)
        driver = subprocess.Popen(
            [sys.executable, "-m", "raydebug", "run", "--", sys.executable, str(job),
             cluster.address], env={**os.environ, **LOOPBACK, "RAYDEBUG_WAIT_TIMEOUT": "300"},
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        [session] = hub.wait_sessions(1, timeout=120)  # registered with the explicit hub
        assert session["task_name"] == "pause"
        driver.kill()  # the job ends while its task is paused: Ray kills the worker
        driver.wait(timeout=30)
        assert hub.wait_sessions(0, timeout=60) == []
    finally:
        if driver is not None:
            stop(driver)
        hub_proc.terminate()  # a clean exit takes its entry out of the KV
        hub_proc.wait(timeout=30)
    # Its entry left the KV with it: the CLI finds (or starts) the hub actor instead.
    after = raydebug_cli("vscode", "--ray-address", cluster.address)
    assert after.returncode == 0, after.stderr
    assert json.loads(after.stdout)["connect"]["port"] != int(port)


IN_CODE_JOB = """
import os, sys, ray, raydebug

ray.init(address=sys.argv[1],
         runtime_env=raydebug.runtime_env({"env_vars": {"MINE": "kept"}}))

@ray.remote(num_cpus=0)
def pause():
    mine = os.environ.get("MINE")
    breakpoint()  # pause here
    return mine

print("result", ray.get(pause.remote()), flush=True)
"""


def test_enabling_in_code_keeps_the_users_runtime_env(cluster: Any, tmp_path: Path):
    job = write_script(tmp_path, "job.py", IN_CODE_JOB)
    driver = subprocess.Popen([sys.executable, str(job), cluster.address],
                              env={**os.environ, **LOOPBACK, "RAYDEBUG_WAIT_TIMEOUT": "300"},
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        listed = raydebug_cli("list", "--ray-address", cluster.address, "--json",
                              "--wait", "1", "--timeout", "120")
        [session] = json.loads(listed.stdout)
        assert session["task_name"] == "pause"
        port = json.loads(raydebug_cli("vscode", "--ray-address", cluster.address).stdout)[
            "connect"]["port"]

        async def check_and_continue() -> None:
            client = await DapClient.connect("127.0.0.1", port)
            await client.initialize()
            stopped = await client.attach(session["id"])
            frames = await client.request("stackTrace", {"threadId": stopped.body["threadId"]})
            mine = await client.request("evaluate", {
                "expression": "mine", "frameId": frames["stackFrames"][0]["id"],
                "context": "repl"})
            assert mine["result"] == "'kept'"
            await client.request("disconnect", {})
            await client.close()

        run(check_and_continue())
        code, out, err = finish(driver, timeout=120)
        assert code == 0 and "result kept" in out, err[-2000:]
    finally:
        stop(driver)
