"""A Ray task waiting in C, paused by `raydebug pause`, unblocked from `raydebug attach`: `n`
off the end of the task says ``--Return--`` with its value and ends the session, as a
breakpoint()'s does, instead of stopping in the worker's next task; the job completes."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

import pexpect
import pytest

from devtools.terminal import PROMPT, end_spawned
from helpers import ask_until, wait_processes
from ray_cluster import LOOPBACK, hub_port, process_running, raydebug_cli, session_in, start_job

pytest.importorskip("ray")
pytestmark = [pytest.mark.integration, pytest.mark.timeout(600)]

JOB = """
import sys, threading
import ray

ray.init(address=sys.argv[1])

@ray.remote
def hold():
    gate = threading.Event()  # made in the task: only a debugger can set it
    gate.wait()  # blocked in C
    after = 21
    return after * 2  # last line

@ray.remote
def next_task():
    reached = "next task"
    return reached

first = hold.remote()
second = next_task.remote()  # one CPU: it runs once hold() has returned
print("ready", flush=True)
print("result", ray.get(first), ray.get(second), flush=True)
"""

RAY_NODES = ({"num_cpus": 1},)  # the module's cluster (the ``cluster`` fixture)


def test_next_off_the_end_of_a_paused_ray_task_ends_its_session(cluster: Any,
                                                                 tmp_path: Path):
    job = tmp_path / "job.py"
    job.write_text(JOB)
    driver = start_job(job, cluster.address)
    term = None
    try:
        assert driver.stdout is not None
        assert driver.stdout.readline() == "ready\n", driver.stderr
        port = hub_port(cluster.address)

        worker = ask_until("the task waits", lambda: process_running(port, "hold"))
        paused = raydebug_cli("pause", f"pid={worker['pid']}", "--ray-address",
                              cluster.address)
        assert paused.returncode == 0, paused.stderr

        session = wait_processes(f"127.0.0.1:{port}", "the task's session", lambda _: session_in(
            cluster.address, worker["id"], "hold"), timeout=180)
        # (The task runs on the worker's main thread: raydebug's signal brings its wait back
        # to Python, so it is not blocked in C.)
        assert session["reason"] == "pause", session

        term = pexpect.spawn(
            sys.executable, ["-m", "raydebug", "attach", session["id"], "--ray-address",
                             cluster.address],
            env={**os.environ, **LOOPBACK, "TERM": "xterm", "NO_COLOR": "1"},
            encoding="utf-8", timeout=120, dimensions=(24, 200))
        if os.environ.get("RAYDEBUG_TEST_TRANSCRIPT"):
            term.logfile_read = sys.stdout
        term.expect_exact(PROMPT)

        def do(command: str) -> str:
            assert term is not None
            term.sendline(command)
            term.expect_exact(PROMPT)
            return str(term.before)

        do("p gate.set()")
        last = f"({JOB.splitlines().index('    return after * 2  # last line') + 1})hold()"
        for _ in range(20):  # two lines to go once the wait has returned
            if last in do("where"):
                break
            do("n")
        assert last in do("where")
        term.sendline("n")  # off the end: into Ray's core worker, not into next_task()
        term.expect_exact("--Return-- hold() -> 42")
        term.expect_exact("hold() returned; the process runs on")
        out, err = driver.communicate(timeout=180)
        assert "result 42 next task" in out, err
    finally:
        if term is not None:
            end_spawned(term)
        if driver.poll() is None:
            driver.kill()
            driver.wait(timeout=30)
