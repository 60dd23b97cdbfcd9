"""Snapshots in Ray: a task, an actor method and an async actor's method that raise under
``raydebug run --snapshots`` fail in the driver at once, as without raydebug, and the
cluster's hub keeps their snapshots after the job and its workers are gone; a snapshot point
on a line of a task run 5 times never pauses the job and leaves a snapshot with that line's
locals."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from helpers import finish, line_of, wait_listing, write_script
from ray_cluster import LOOPBACK, free_port, get, hub_port, raydebug_cli

pytestmark = pytest.mark.integration

RAY_NODES = ({"num_cpus": 1}, {"num_cpus": 1})  # two nodes on loopback
# A job's whole run, its driver's start to its exit: the first one on the module's cluster
# also starts its workers and the hub actor, and Serve's start and shutdown alone took ~30 s
# in loaded fresh-clone runs (load 15 on 2 cores). What must be quick is asserted apart.
JOB_BOUND = 90.0

FAILING_JOB = """
import sys, time
import ray

ray.init(address=sys.argv[1])

@ray.remote(max_retries=0)
def train_step(batch):
    config = {"lr": 0.1, "layers": [{"units": 64}, {"units": 32}]}
    total = sum(batch)
    raise ValueError(f"diverged at {total}")  # raised here

@ray.remote(max_restarts=0)
class Trainer:
    def fit(self, epochs):
        raise RuntimeError(f"fit failed after {epochs}")

    async def evaluate(self, split):
        raise KeyError(split)

started = time.monotonic()
try:
    ray.get(train_step.remote([1, 2, 3]))
except ray.exceptions.RayTaskError as error:
    print("driver got", type(error.cause).__name__, f"{time.monotonic() - started:.1f}s",
          flush=True)
trainer = Trainer.remote()
for call in (trainer.fit.remote(2), trainer.evaluate.remote("test")):
    try:
        ray.get(call)
    except ray.exceptions.RayTaskError as error:
        print("driver got", type(error.cause).__name__, flush=True)
print("the actor still answers:", ray.get(trainer.__ray_ready__.remote()), flush=True)
"""


def run_job(job: Path, address: str, *options: str, args: tuple[str, ...] = ()
            ) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "raydebug", "run", *options, "--", sys.executable, str(job),
         address, *args], env={**os.environ, **LOOPBACK, "PYTHONUNBUFFERED": "1"},
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def snapshots_of(port: int, task: str) -> list[dict[str, Any]]:
    return list(wait_listing(f"127.0.0.1:{port}", "/api/snapshots", f"a snapshot of {task}",
                             lambda answer: [row for row in answer["snapshots"]
                                             if row.get("task_name") == task]))


def value(values: list[dict[str, Any]], name: str) -> dict[str, Any]:
    return next(found for found in values if found["name"] == name)


def test_a_failing_task_fails_at_once_and_its_snapshot_outlives_the_job(cluster: Any,
                                                                       tmp_path: Path):
    job = write_script(tmp_path, "job.py", FAILING_JOB)
    code, out, err = finish(run_job(job, cluster.address, "--snapshots"), timeout=JOB_BOUND)
    assert code == 0 and "driver got ValueError" in out, (out, err)
    assert "driver got RuntimeError" in out and "driver got KeyError" in out, (out, err)
    assert "the actor still answers: True" in out, (out, err)
    port = hub_port(cluster.address)
    [fit] = snapshots_of(port, "Trainer.fit")
    assert fit["exception"] == "RuntimeError: fit failed after 2" and fit["function"] == "fit"
    [evaluate] = snapshots_of(port, "Trainer.evaluate")  # an async actor's method
    assert evaluate["exception"] == "KeyError: 'test'"
    [row] = snapshots_of(port, "train_step")  # the driver and its job are gone by now
    assert row["exception"] == "ValueError: diverged at 6"
    assert (row["function"], row["line"]) == ("train_step", line_of(job, "raised here"))
    assert row["job_id"] and row["node_ip"] == "127.0.0.1"
    assert row["node_id"] in {node.node_id for node in cluster.list_all_nodes()}
    snapshot = get(port, f"/api/snapshot?id={row['id']}")
    # The user's frames only: none of Ray's executor that ran the task (_raylet.pyx's)
    assert [frame["function"] for frame in snapshot["frames"]] == ["train_step"], snapshot
    assert "_raylet" not in snapshot["exception"]["traceback"]
    fit_frames = get(port, f"/api/snapshot?id={fit['id']}")["frames"]
    assert [frame["function"] for frame in fit_frames] == ["fit"]  # not Ray's wrappers
    top = snapshot["frames"][0]
    assert value(top["locals"], "total")["repr"] == "6"
    layers = value(value(top["locals"], "config")["children"], "['layers']")
    assert value(value(layers["children"], "[1]")["children"], "['units']")["repr"] == "32"


STEPS_JOB = """
import sys
import ray

ray.init(address=sys.argv[1])

@ray.remote
def step(i):
    scaled = i * 10
    return scaled + 1  # snapshot point

print("done", sum(ray.get([step.remote(i) for i in range(5)])), flush=True)
"""


def test_a_snapshot_point_in_a_task_never_pauses_the_job(cluster: Any, tmp_path: Path):
    job = write_script(tmp_path, "steps.py", STEPS_JOB)
    line = line_of(job, "snapshot point")
    armed = raydebug_cli("break", f"{job}:{line}", "--snapshot", "--ray-address",
                         cluster.address)
    assert armed.returncode == 0, armed.stderr
    try:
        code, out, err = finish(run_job(job, cluster.address), timeout=JOB_BOUND)
        assert code == 0 and "done 105" in out, (out, err)
        port = hub_port(cluster.address)
        [row] = snapshots_of(port, "step")[:1]
        assert row["reason"] == "snapshot" and row["line"] == line
        assert get(port, "/api/sessions") == []
        top = get(port, f"/api/snapshot?id={row['id']}")["frames"][0]
        scaled, i = value(top["locals"], "scaled")["repr"], value(top["locals"], "i")["repr"]
        assert scaled == str(int(i) * 10)
    finally:
        raydebug_cli("break", "--clear", "--ray-address", cluster.address)


SERVE_JOB = """
import os, sys, time, urllib.error, urllib.request
import ray
from ray import serve

ray.init(address=sys.argv[1])
port = int(sys.argv[2])

@serve.deployment(ray_actor_options={"num_cpus": 0})
class Scorer:
    async def __call__(self, request):
        if request.url.path.endswith("/fail"):
            weights = {"bias": 0.5, "scale": [1, 2]}
            raise ValueError(f"bad input {weights['bias']}")  # handler raises
        return {"pid": os.getpid()}

serve.start(http_options={"host": "127.0.0.1", "port": port, "location": "HeadOnly"})
serve.run(Scorer.bind(), route_prefix="/")

def get(path):
    started = time.monotonic()
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=30) as answer:
            status, body = answer.status, answer.read().decode()
    except urllib.error.HTTPError as error:
        status, body = error.code, error.read().decode()
    print(path, status, f"{time.monotonic() - started:.1f}s", body, flush=True)

get("/good")
get("/fail")
get("/good")
serve.shutdown()
"""


def test_a_serve_handler_that_raises_answers_500_at_once_and_leaves_a_snapshot(
        cluster: Any, tmp_path: Path):
    job = write_script(tmp_path, "serve_job.py", SERVE_JOB)
    code, out, err = finish(run_job(job, cluster.address, "--snapshots", args=(str(free_port()),)),
                            timeout=JOB_BOUND)
    assert code == 0, (out, err)
    answers = [line.split(" ", 3) for line in out.splitlines() if line.startswith("/")]
    [(_, good, _, first), (_, failed, took, _), (_, again, _, second)] = answers
    assert (good, failed, again) == ("200", "500", "200"), out
    assert float(took.rstrip("s")) < 5, out  # the request is not held for a debugger
    assert first == second, out  # the same replica (its pid) serves on after the failure
    port = hub_port(cluster.address)
    [row] = wait_listing(f"127.0.0.1:{port}", "/api/snapshots", "the handler's snapshot",
                         lambda answer: [row for row in answer["snapshots"]
                                         if row.get("exception") == "ValueError: bad input 0.5"])
    # one snapshot (Ray's executor reports a failing async generator's exception twice)
    assert (row["function"], row["line"]) == ("__call__", line_of(job, "handler raises"))
    assert row["task_name"].startswith("ServeReplica:default:Scorer")
    top = get(port, f"/api/snapshot?id={row['id']}")["frames"][0]
    weights = value(top["locals"], "weights")
    assert value(weights["children"], "['bias']")["repr"] == "0.5"
