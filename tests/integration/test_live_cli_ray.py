"""`raydebug ps`, `stacks` and `pause` with `--ray-address`, against a real two-node Ray job
(no raydebug in its code) whose eight tasks all wait: six shards in one function, one shard
stuck in another, and the straggler, a task of its own. The CLI finds the cluster's hub,
lists the workers by task, sets the straggler apart in the merged stacks, marks only the
stuck shard odd (not the driver, an idle worker or the straggler: they are not the shards'
peers), and pauses the straggler by its task name."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from helpers import ask_until  # what runs now is asked, not pushed
from ray_cluster import raydebug_cli, start_job

pytest.importorskip("ray")
pytestmark = [pytest.mark.integration, pytest.mark.timeout(600)]

JOB = """
import sys, threading, time
import ray

ray.init(address=sys.argv[1])

def wait_for_the_others(i):
    time.sleep(600)

def stuck_elsewhere(i):
    threading.Event().wait(600)  # nobody sets it

@ray.remote(num_cpus=0.25)
def shard(i):
    if i == 6:
        stuck_elsewhere(i)
    wait_for_the_others(i)

@ray.remote(num_cpus=0.25)
def straggler(i):
    never = threading.Event()  # nobody sets it; back in Python every 50 ms, so it can pause
    while not never.wait(0.05):
        pass

refs = [shard.remote(i) for i in range(7)] + [straggler.remote(7)]
print("submitted", flush=True)
ray.get(refs)
"""

RAY_NODES = ({"num_cpus": 1}, {"num_cpus": 1})  # the ``cluster`` fixture's two nodes


def walk(node: dict[str, Any]) -> list[dict[str, Any]]:
    """``node`` of a ``stacks --json`` tree and every node under it."""
    return [node, *(below for child in node["children"] for below in walk(child))]


def test_ps_stacks_and_pause_find_the_straggler_of_a_ray_job(cluster: Any, tmp_path: Path):
    job = tmp_path / "job.py"
    job.write_text(JOB)
    address = ["--ray-address", cluster.address]
    driver = start_job(job, cluster.address)
    try:
        assert driver.stdout is not None and driver.stdout.readline() == "submitted\n"

        def running_tasks() -> list[dict[str, Any]] | None:
            done = raydebug_cli("ps", "--json", *address)
            assert done.returncode == 0, done.stderr
            found = [p for p in json.loads(done.stdout)
                     if p["task_name"] in ("shard", "straggler")]
            return found if len(found) == 8 else None

        tasks = ask_until("eight tasks running", running_tasks)
        assert {p["state"] for p in tasks} == {"running"}
        assert len({p["node_id"] for p in tasks}) == 2, tasks  # both nodes' workers
        straggler = next(p for p in tasks if p["task_name"] == "straggler")

        table = raydebug_cli("ps", "task=shard", *address).stdout.splitlines()
        assert table[0].startswith("7 live processes on the hub at "), table
        assert "task" in table[1].split() and all("shard" in row for row in table[2:])

        # Ray lists a task as running before its worker reaches the function: a worker's
        # first task deserializes its arguments first, which imports pyarrow (a CI run's
        # straggler was still there under load). So the stacks are asked until each task
        # is in its own code.
        def in_their_functions() -> tuple[str, dict[str, str]] | None:
            shown = raydebug_cli("stacks", "job=" + tasks[0]["job_id"], *address,
                                 "--timeout", "5")
            assert shown.returncode == 0, shown.stderr
            found = {name: next((line for line in shown.stdout.splitlines()
                                 if f" {name} " in line), "? ")
                     for name in ("shard", "wait_for_the_others", "straggler",
                                  "stuck_elsewhere")}
            there = found["shard"].split()[0] == "7" and found["straggler"] != "? "
            return (shown.stdout, found) if there else None

        shown, found = ask_until("the tasks in their functions", in_their_functions, 60)
        assert found["wait_for_the_others"].split()[0] == "6", shown  # six shards, together
        assert found["straggler"].split()[0] == "1", shown  # the straggler, apart
        assert f"pid {straggler['pid']}" in shown, shown
        assert found["stuck_elsewhere"].split()[0] == "1", shown

        # Red is odd among peers: the stuck shard only, whatever else runs on the cluster
        # (the driver, idle workers, the straggler: each a group of its own).
        every = raydebug_cli("stacks", "--json", *address, "--timeout", "5")
        assert every.returncode == 0, every.stderr
        odd = [node for node in walk(json.loads(every.stdout)["tree"]["root"])
               if node["odd"]]
        assert [node["function"] for node in odd] == ["stuck_elsewhere"], [
            (node["function"], node["odd_among"]) for node in odd]
        assert odd[0]["odd_among"] == [f"task shard of job {tasks[0]['job_id']}"]

        paused = raydebug_cli("pause", "task=straggler", *address)
        assert paused.returncode == 0, paused.stderr
        assert paused.stdout.startswith(f"paused {straggler['id']}: session "), paused
        listed = json.loads(raydebug_cli("list", "--json", *address).stdout)
        mine = [s for s in listed if s["process"] == straggler["id"]]
        assert mine and {s["reason"] for s in mine} == {"pause"}, listed
        assert f"(raydebug attach {mine[0]['id']})" in paused.stdout or len(mine) > 1
    finally:
        driver.kill()
        driver.wait(timeout=30)
