"""Where a Ray job's code runs besides plain tasks, each `breakpoint()` is a session.

One real two-node cluster (ray.cluster_utils.Cluster on loopback) for the whole module, and
one job per test under `raydebug run`: a subprocess of a task, a fork child of a task, an
actor with eight threads paused at once, a detached actor, a Ray Data UDF and Ray Train
workers. Each test checks the session's pid and its job/task identities, attaches with a
DAP client, evaluates a local, continues, and waits for the job to finish.
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from helpers import attach, evaluate_and_continue, finish, read_line, run, stop, write_script
from ray_cluster import LOOPBACK, raydebug_cli

pytest.importorskip("ray")
pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]

from raydebug.client.dap import DapClient  # noqa: E402

PRELUDE = """
import json, os, subprocess, sys, time
import ray

ray.init(address=sys.argv[1])  # knows nothing of raydebug: `raydebug run` enables it
print("job", ray.get_runtime_context().get_job_id(), flush=True)
"""


@dataclass
class RayCluster:
    """The module's cluster, and the hub its jobs share (found at the first pause)."""

    cluster: Any
    hub_port: int | None = None
    drivers: list[subprocess.Popen[str]] = field(default_factory=list)

    @property
    def address(self) -> str:
        return str(self.cluster.address)

    def start_job(self, directory: Path, source: str, **env: str) -> tuple[
            subprocess.Popen[str], str]:
        """`raydebug run -- python job.py`; return the driver and its job id."""
        job = write_script(directory, "job.py", PRELUDE + source)
        driver = subprocess.Popen(
            [sys.executable, "-m", "raydebug", "run", "--", sys.executable, str(job),
             self.address],
            env={**os.environ, **LOOPBACK, "RAYDEBUG_WAIT_TIMEOUT": "180",
                 "PYTHONUNBUFFERED": "1", **env},
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.drivers.append(driver)
        deadline = time.monotonic() + 120
        while True:  # Ray's own lines may come first
            line = read_line(driver, timeout=max(0.1, deadline - time.monotonic()))
            if line.startswith("job "):
                return driver, line.split()[1]
            if not line and driver.poll() is not None:
                pytest.fail(f"the job ended early: {driver.communicate()[1][-3000:]}")

    def wait_sessions(self, count: int, driver: subprocess.Popen[str],
                      timeout: float = 150) -> list[dict[str, Any]]:
        """Exactly ``count`` sessions on the cluster's hub (failing early if the job ends)."""
        if self.hub_port is None:  # the first pause of the module starts the hub
            listed = raydebug_cli("list", "--ray-address", self.address, "--json",
                                  "--wait", str(count), "--timeout", str(timeout))
            if listed.returncode != 0 and driver.poll() is not None:
                pytest.fail(f"the job ended: {driver.communicate()[1][-3000:]}")
            assert listed.returncode == 0, listed.stderr
            config = json.loads(raydebug_cli("vscode", "--ray-address", self.address).stdout)
            self.hub_port = int(config["connect"]["port"])
        deadline = time.monotonic() + timeout
        while True:
            remaining = deadline - time.monotonic()
            wait = min(max(remaining, 0.1), 5.0)
            url = (f"http://127.0.0.1:{self.hub_port}/api/sessions"
                   f"?min={count}&max={count}&timeout={wait:.2f}")
            with urllib.request.urlopen(url, timeout=wait + 10) as response:
                sessions: list[dict[str, Any]] = json.loads(response.read())
            if len(sessions) == count:
                return sessions
            if driver.poll() is not None:
                pytest.fail(f"the job ended with {len(sessions)} sessions: "
                            f"{driver.communicate()[1][-3000:]}")
            if remaining <= 0:
                raise TimeoutError(f"expected {count} sessions, the hub has {len(sessions)}")

    async def attach(self, session_id: str) -> tuple[DapClient, dict[str, Any]]:
        """A client attached to ``session_id``; return it and the ``stopped`` event's body."""
        assert self.hub_port is not None
        return await attach("127.0.0.1", self.hub_port, session_id, timeout=60)

    def debug(self, session: dict[str, Any], expression: str) -> str:
        """Attach, evaluate ``expression`` in the paused frame, continue, detach."""
        assert self.hub_port is not None
        return run(evaluate_and_continue("127.0.0.1", self.hub_port, session["id"], expression,
                                         timeout=60), timeout=120).result

    def finish(self, driver: subprocess.Popen[str]) -> str:
        """Wait for the job to complete successfully; return its stdout."""
        code, out, err = finish(driver, timeout=120)
        assert code == 0, err[-3000:]
        return out


RAY_NODES = ({"num_cpus": 2}, {"num_cpus": 2})  # the ``cluster`` fixture: tasks run on either


@pytest.fixture(scope="module")
def ray_cluster(cluster: Any) -> Iterator[RayCluster]:
    """The module's cluster with its jobs' drivers, each stopped after the module."""
    shared = RayCluster(cluster)
    try:
        yield shared
    finally:
        for driver in shared.drivers:
            stop(driver)


def environ_of(pid: int) -> dict[str, str]:
    """What `ps e` shows of a process's environment."""
    entries = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    return dict(entry.decode(errors="replace").partition("=")[::2] for entry in entries if entry)


SUBPROCESS_JOB = """
CHILD = "import os\\nin_child = os.getpid() * 10\\nbreakpoint()\\nprint('child', in_child)\\n"

@ray.remote(num_cpus=0)
def spawns():
    debugged = subprocess.run([sys.executable, "-c", CHILD], capture_output=True, text=True)
    # An interpreter where raydebug is not importable (-S: no site-packages) only warns.
    plain = subprocess.run([sys.executable, "-S", "-c", "breakpoint(); print('plain ran on')"],
                           capture_output=True, text=True)
    return [os.getpid(), debugged.returncode, debugged.stdout, plain.returncode, plain.stdout,
            plain.stderr]

print("result", json.dumps(ray.get(spawns.remote())), flush=True)
"""


def test_a_subprocess_of_a_task(ray_cluster: RayCluster, tmp_path: Path):
    driver, job_id = ray_cluster.start_job(tmp_path, SUBPROCESS_JOB)
    [session] = ray_cluster.wait_sessions(1, driver)
    assert session["job_id"] == job_id and session["task_name"] == "spawns"
    assert session["task_id"] and session["node_id"] and session["worker_id"]
    parent_pid = int(session["labels"]["parent_pid"])
    assert session["pid"] != parent_pid and session["pid"] != driver.pid

    # The child reaches the hub with a token file, never the token in its environment.
    environment = environ_of(session["pid"])
    token_file = Path(environment["RAYDEBUG_TOKEN_FILE"])
    assert stat.S_IMODE(token_file.stat().st_mode) == 0o600
    token = token_file.read_text().strip()
    assert token and "RAYDEBUG_TOKEN" not in environment
    assert not any(token in value for value in environment.values())

    assert ray_cluster.debug(session, "in_child") == str(session["pid"] * 10)
    out = ray_cluster.finish(driver)
    [result] = [json.loads(line.split(" ", 1)[1]) for line in out.splitlines()
                if line.startswith("result ")]
    worker_pid, code, child_out, plain_code, plain_out, plain_err = result
    assert worker_pid == parent_pid
    assert code == 0 and child_out == f"child {session['pid'] * 10}\n"
    assert plain_code == 0 and plain_out == "plain ran on\n"
    assert "Ignoring unimportable $PYTHONBREAKPOINT" in plain_err, plain_err


FORK_JOB = """
import multiprocessing

@ray.remote(num_cpus=0)
def forks():
    in_parent = os.getpid()
    breakpoint()  # the task first: its agent and pydevd exist when it forks

    def child(queue):
        in_child = os.getpid() * 10
        breakpoint()  # each child: a session of its own
        queue.put(in_child)

    context = multiprocessing.get_context("fork")  # as a DataLoader with 2 workers does
    queue = context.Queue()
    children = [context.Process(target=child, args=(queue,)) for _ in range(2)]
    for process in children:
        process.start()
    results = sorted(queue.get(timeout=240) for _ in children)
    for process in children:
        process.join(timeout=60)
    return [in_parent, sorted(p.pid for p in children), results,
            [p.exitcode for p in children]]

print("result", json.dumps(ray.get(forks.remote())), flush=True)
"""


def test_fork_children_of_a_task(ray_cluster: RayCluster, tmp_path: Path):
    driver, job_id = ray_cluster.start_job(tmp_path, FORK_JOB)
    [parent] = ray_cluster.wait_sessions(1, driver)
    assert parent["job_id"] == job_id and parent["task_name"] == "forks"
    assert ray_cluster.debug(parent, "in_parent") == str(parent["pid"])

    children = sorted(ray_cluster.wait_sessions(2, driver), key=lambda s: s["pid"])
    pids = [child["pid"] for child in children]
    assert len(set(pids)) == 2 and parent["pid"] not in pids
    for child in children:
        assert child["function"] == "child"
        assert child["labels"]["parent_pid"] == str(parent["pid"])
        for name in ("job_id", "task_id", "task_name", "node_id", "worker_id", "attempt"):
            assert child[name] == parent[name], name
        assert ray_cluster.debug(child, "in_child") == str(child["pid"] * 10)
    out = ray_cluster.finish(driver)
    assert f"result [{parent['pid']}, {pids}, {[p * 10 for p in pids]}, [0, 0]]" in out


THREADED_ACTOR_JOB = """
@ray.remote(num_cpus=0, max_concurrency=8)
class Threaded:
    def work(self, x):
        mine = x * 100
        breakpoint()
        return mine

actor = Threaded.remote()
print("result", ray.get([actor.work.remote(i) for i in range(8)]), flush=True)
"""


def test_an_actor_with_eight_threads_paused_at_once(ray_cluster: RayCluster, tmp_path: Path):
    driver, job_id = ray_cluster.start_job(tmp_path, THREADED_ACTOR_JOB)
    sessions = ray_cluster.wait_sessions(8, driver)
    assert len({s["pid"] for s in sessions}) == 1
    assert len({s["thread"] for s in sessions}) == 8
    assert len({s["task_id"] for s in sessions}) == 8
    assert len({s["actor_id"] for s in sessions}) == 1
    for session in sessions:
        assert session["job_id"] == job_id and session["task_name"] == "Threaded.work"
        assert session["actor_class"] == "Threaded"

    async def each_thread() -> None:
        # One process, one pydevd: a client of any of its sessions sees all eight threads
        # stopped in `work`, and evaluates in each thread's own frame.
        client, _stopped = await ray_cluster.attach(sessions[0]["id"])
        values = set()
        deadline = time.monotonic() + 60
        while len(values) < 8:
            assert time.monotonic() < deadline, values
            values = set()
            for thread in (await client.request("threads"))["threads"]:
                response = await client.request_response("stackTrace",
                                                         {"threadId": thread["id"]})
                frames = response.body.get("stackFrames") if response.success else None
                if frames and frames[0]["name"] == "work":
                    value = await client.request("evaluate", {
                        "expression": "mine", "frameId": frames[0]["id"], "context": "repl"})
                    values.add(value["result"])
        assert values == {str(i * 100) for i in range(8)}
        await client.request("continue", {"threadId": _stopped["threadId"]})  # all threads
        await client.request("disconnect", {})
        await client.close()

    run(each_thread(), timeout=120)
    out = ray_cluster.finish(driver)
    assert f"result {[i * 100 for i in range(8)]}" in out


DETACHED_ACTOR_JOB = """
@ray.remote(num_cpus=0)
class Detached:
    def work(self, x):
        mine = x + 1
        breakpoint()
        return mine

actor = Detached.options(name="raydebug_test_detached", lifetime="detached").remote()
try:
    print("result", ray.get(actor.work.remote(41)), flush=True)
finally:
    ray.kill(actor)
"""


def test_a_detached_actor(ray_cluster: RayCluster, tmp_path: Path):
    driver, job_id = ray_cluster.start_job(tmp_path, DETACHED_ACTOR_JOB)
    [session] = ray_cluster.wait_sessions(1, driver)
    assert session["job_id"] == job_id and session["task_name"] == "Detached.work"
    assert session["actor_class"] == "Detached" and session["actor_id"]
    assert ray_cluster.debug(session, "mine") == "42"
    assert "result 42" in ray_cluster.finish(driver)


DATA_JOB = """
import ray.data

def udf(batch):
    rows = len(batch["id"])
    breakpoint()
    return {"id": batch["id"] * 2}

total = ray.data.range(8).map_batches(udf, batch_size=8).sum("id")
print("result", total, flush=True)
"""


def test_a_ray_data_udf(ray_cluster: RayCluster, tmp_path: Path):
    driver, job_id = ray_cluster.start_job(tmp_path, DATA_JOB)
    [session] = ray_cluster.wait_sessions(1, driver)
    assert session["job_id"] == job_id and session["function"] == "udf"
    assert session["task_id"] and "udf" in session["task_name"], session["task_name"]
    assert ray_cluster.debug(session, "rows") == "8"
    assert "result 56" in ray_cluster.finish(driver)


TRAIN_JOB = """
import ray.train
from ray.train import RunConfig, ScalingConfig
from ray.train.v2.api.data_parallel_trainer import DataParallelTrainer

def train_loop():
    rank = ray.train.get_context().get_world_rank()
    breakpoint()
    ray.train.report({"rank": rank})

trainer = DataParallelTrainer(
    train_loop, scaling_config=ScalingConfig(num_workers=2),
    run_config=RunConfig(name="raydebug", storage_path=os.path.dirname(os.path.abspath(__file__))))
result = trainer.fit()
print("result", result.error, flush=True)
"""


def test_ray_train_workers(ray_cluster: RayCluster, tmp_path: Path):
    pytest.importorskip("ray.train.v2.api.data_parallel_trainer")
    # Ray Train's controller looks at its workers every 2 s (its health check): the
    # workers' start, and their end once continued, waited for that look (~5 s of the test).
    driver, job_id = ray_cluster.start_job(tmp_path, TRAIN_JOB, RAY_TRAIN_V2_ENABLED="1",
                                           RAY_TRAIN_HEALTH_CHECK_INTERVAL_S="0.5")
    sessions = ray_cluster.wait_sessions(2, driver)
    assert len({s["pid"] for s in sessions}) == 2
    ranks = set()
    for session in sessions:
        assert session["job_id"] == job_id and session["function"] == "train_loop"
        assert session["actor_id"] and session["task_id"]
        ranks.add(ray_cluster.debug(session, "rank"))
    assert ranks == {"0", "1"}
    assert "result None" in ray_cluster.finish(driver)
