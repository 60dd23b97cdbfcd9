"""Live processes in a real multi-node Ray job (ray.cluster_utils.Cluster on loopback):
the straggler found by its stack, paused by its task name, its locals read, the job
completed; a task's forked child and subprocess linked as processes of their own."""

from __future__ import annotations

import asyncio
import os
import signal
from pathlib import Path
from typing import Any

import pytest

from helpers import ask_until, run, wait_listing, wait_processes
from ray_cluster import get, hub_port, post, start_job

pytest.importorskip("ray")
pytestmark = [pytest.mark.integration, pytest.mark.timeout(600)]

from raydebug.client.dap import DapClient  # noqa: E402

JOB = """
import multiprocessing, os, subprocess, sys, threading, time
import ray

ray.init(address=sys.argv[1])  # knows nothing of raydebug: `raydebug run` enables it

@ray.remote(num_cpus=0.25)
def quick(i):
    time.sleep(0.2)
    return i

@ray.remote(num_cpus=0.25)
def straggler(i):
    event = threading.Event()  # nobody sets it: only a debugger can
    while not event.is_set():
        event.wait(0.05)
    return i

def nap():
    time.sleep(300)

@ray.remote(num_cpus=0.25)
def spawner():
    forked = multiprocessing.get_context("fork").Process(target=nap)
    forked.start()
    sub = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)"])
    return forked.pid, sub.pid

@ray.remote(num_cpus=0)
class Keeper:
    def ready(self):
        return True

keeper = Keeper.remote()
ray.get(keeper.ready.remote())  # an idle actor: listed with its class
print("children", *ray.get(spawner.remote()), flush=True)
refs = [quick.remote(i) for i in range(7)] + [straggler.remote(7)]
print("results", ray.get(refs), flush=True)
"""

RAY_NODES = ({"num_cpus": 1}, {"num_cpus": 1})  # the ``cluster`` fixture's two nodes


def straggler_entry(port: int) -> dict[str, Any] | None:
    for entry in get(port, "/api/stacks?timeout=5")["processes"]:
        for thread in entry["threads"]:
            if any(frame["function"] == "straggler" for frame in thread["frames"]):
                return entry
    return None


def test_a_straggler_is_found_paused_and_continued(cluster: Any, tmp_path: Path):
    job = tmp_path / "job.py"
    job.write_text(JOB)
    driver = start_job(job, cluster.address)
    children: list[int] = []
    try:
        line = driver.stdout.readline().split()
        assert line[0] == "children", (line, driver.stderr.read() if not line else "")
        children = [int(line[1]), int(line[2])]
        port = hub_port(cluster.address)
        # Linked, and their worker too: a child's parent is the linked process of its
        # parent's pid, so it is known only once that worker's link registered (a fresh-clone
        # run read the children first).
        # The worker's own record must name its Ray ids too: its link may register before
        # Ray's ids are known, and register again with them (a fresh-clone run read the
        # parent without its worker_id: StopIteration below).
        processes = wait_processes(
            f"127.0.0.1:{port}", "the children and their worker are linked", lambda ps: (
                all(p["parent"] for p in ps if p["pid"] in children)
                and all(pid in {p["pid"] for p in ps} for pid in children)
                and all(any(q["worker_id"] and q["id"] == p["parent"] for q in ps)
                        for p in ps if p["pid"] in children)
                and ps),
            timeout=180, query="now=1")
        by_pid = {p["pid"]: p for p in processes}
        worker = next((p for p in processes if p["pid"] not in children
                       and p["worker_id"] and by_pid[children[0]]["parent"] == p["id"]),
                      None)
        assert worker is not None, (children, processes)
        for pid in children:
            child = by_pid[pid]
            assert child["parent"] == worker["id"]
            assert child["job_id"] == worker["job_id"] and child["job_id"]
            assert child["task_name"] == "spawner"
        driver_record = [p for p in processes if p["worker_id"] and p["pid"] == driver.pid]
        assert driver_record, "the driver is linked from its start"

        entry = ask_until("the straggler's stack", lambda: straggler_entry(port))
        assert entry["process"]["task_name"] == "straggler"
        listed = get(port, "/api/processes")
        nodes = {p["node_id"] for p in listed if p["node_id"]}
        assert len(nodes) == 2  # the workers of both nodes are linked
        keepers = [p for p in listed if p["actor_class"] == "Keeper"]
        assert len(keepers) == 1 and keepers[0]["task_name"] is None  # idle, read now
        assert not [p for p in listed if p["actor_class"] == "_HubActor"]  # not itself
        status, paused = post(port, "/api/pause", {"selector": ["task=straggler"]})
        assert status == 200 and paused["paused"] == [entry["process"]["id"]], paused
        sessions = wait_listing(f"127.0.0.1:{port}", "/api/sessions", "the pause's sessions",
                                lambda listed: [s for s in listed
                                                if s["process"] == paused["paused"][0]
                                                and s["function"] in ("straggler", "wait")],
                                timeout=180)

        async def set_the_event() -> None:
            client = await DapClient.connect("127.0.0.1", port)
            await client.initialize()
            await client.attach(sessions[0]["id"], timeout=60)
            threads = (await client.request("threads"))["threads"]
            for thread in threads:
                frames = (await client.request("stackTrace", {
                    "threadId": thread["id"]}))["stackFrames"]
                task = [f for f in frames if f["name"] == "straggler"]
                if task:
                    scopes = await client.request("scopes", {"frameId": task[0]["id"]})
                    variables = await client.request("variables", {
                        "variablesReference": scopes["scopes"][0]["variablesReference"]})
                    names = {v["name"]: v["value"] for v in variables["variables"]}
                    assert names["i"] == "7"
                    await client.request("evaluate", {
                        "expression": "event.set()", "frameId": task[0]["id"],
                        "context": "repl"})
                    break
            else:
                raise AssertionError(f"no thread runs the straggler: {threads}")
            await client.request("continue", {"threadId": threads[0]["id"]})
            await client.request("disconnect", {})
            await client.close()

        run(set_the_event(), timeout=120)
        out, err = driver.communicate(timeout=180)
        assert "results [0, 1, 2, 3, 4, 5, 6, 7]" in out, err
    finally:
        if driver.poll() is None:
            driver.kill()
            driver.wait(timeout=30)
        for pid in children:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass


LOOPER = """
import sys, time
import ray

ray.init(address=sys.argv[1])

@ray.remote(num_cpus=0.25)
def looper(flag):
    open(flag, "w").close()
    while True:
        time.sleep(0.05)

ray.get(looper.remote(sys.argv[2]))
"""


def test_a_group_on_a_task_name_shows_the_task_that_runs_now(cluster: Any, tmp_path: Path):
    """`raydebug attach --group task=NAME` while the task runs, no listing having asked the
    workers what they run since it started (its worker may link after the task began): the
    group asks them, as `ps task=NAME` does (it said no process matched, and never showed
    the task)."""
    job = tmp_path / "looper.py"
    job.write_text(LOOPER)
    flag = tmp_path / "started"
    port = hub_port(cluster.address)
    driver = start_job(job, cluster.address, str(flag))
    try:
        ask_until("the looper to start", lambda: flag.exists() or None)

        async def attach_the_group() -> None:
            client = await DapClient.connect("127.0.0.1", port)
            await client.initialize(supportsStartDebuggingRequest=False)
            attach = client.send_request("attach", {"name": "loopers",
                                                    "raydebug": {"group": "task=looper"}})
            await client.wait_event("initialized")
            assert (await attach).success
            await client.request("configurationDone")
            names: list[str] = []
            for _ in range(60):
                names = [t["name"] for t in (await client.request("threads"))["threads"]]
                if any("looper" in name.split(" · ") for name in names):
                    break
                await asyncio.sleep(0.25)
            else:
                raise AssertionError(f"the running looper is not in the group: {names}")
            await client.request("disconnect", {})
            await client.close()

        run(attach_the_group(), timeout=120)
    finally:
        if driver.poll() is None:
            driver.kill()
            driver.wait(timeout=30)
