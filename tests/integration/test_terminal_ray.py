"""`raydebug attach` on a real Ray cluster (one node, on loopback): stepping off the end of
a task, and a threaded actor whose paused calls are continued one at a time."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pexpect
import pytest

from devtools.terminal import PROMPT, end_spawned
from helpers import stop, write_script
from ray_cluster import LOOPBACK

pytest.importorskip("ray")
pytestmark = [pytest.mark.integration, pytest.mark.timeout(600)]


JOB = """
import sys
import threading
import ray

ray.init(address=sys.argv[1])

@ray.remote(num_cpus=0)
def preprocess(shard):
    rows = [shard * 10 + i for i in range(3)]
    breakpoint()
    return sum(rows)  # last line

@ray.remote(num_cpus=0, max_concurrency=3)
class Threaded:
    def __init__(self):
        self.arrived = threading.Barrier(2)

    def work(self, x):
        self.arrived.wait()  # both calls run at once, in two threads
        local = x * 2
        breakpoint()
        return local

print("task", ray.get(preprocess.remote(1)), flush=True)
actor = Threaded.remote()
print("actor", sorted(ray.get([actor.work.remote(4), actor.work.remote(5)])), flush=True)
"""


RAY_NODES = ({"num_cpus": 2},)  # the module's cluster (the ``cluster`` fixture)


def test_a_task_stepped_off_its_end_and_a_threaded_actor_continued_call_by_call(
        cluster: Any, tmp_path: Path):
    job = write_script(tmp_path, "job.py", JOB)
    env = {**os.environ, **LOOPBACK, "RAYDEBUG_WAIT_TIMEOUT": "300", "PYTHONUNBUFFERED": "1"}
    driver = subprocess.Popen(
        [sys.executable, "-m", "raydebug", "run", "--", sys.executable, str(job),
         cluster.address], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    # The cluster's hub starts at the first pause (attach before it is another issue's).
    listed = subprocess.run([sys.executable, "-m", "raydebug", "list", "--ray-address",
                             cluster.address, "--json", "--wait", "1", "--timeout", "180"],
                            capture_output=True, text=True, timeout=200, env=env)
    assert listed.returncode == 0, listed.stderr
    term = pexpect.spawn(
        sys.executable, ["-m", "raydebug", "attach", "--follow", "--ray-address",
                         cluster.address],
        env={**env, "TERM": "xterm", "NO_COLOR": "1"}, encoding="utf-8", timeout=120,
        dimensions=(24, 80))
    try:
        if os.environ.get("RAYDEBUG_TEST_TRANSCRIPT"):
            term.logfile_read = sys.stdout
        term.expect_exact(PROMPT)
        assert "task preprocess" in str(term.before)
        term.sendline("n")  # off the end: into Ray's core worker, where pydevd never stops
        term.expect_exact("--Return-- preprocess() -> 33")
        term.expect_exact("preprocess() returned; the process runs on")

        # The actor: two calls paused in two threads of one process.
        term.expect_exact(PROMPT)
        assert "actor Threaded.work" in str(term.before)
        term.sendline("threads")
        term.expect_exact(PROMPT)
        assert str(term.before).count("(stopped)") == 2, term.before
        term.sendline("c")  # this call only: the other stays stopped, and is next
        term.expect_exact("work() returned; the process runs on")
        term.expect_exact("is still stopped")
        term.expect_exact(PROMPT)
        term.sendline("p local")
        term.expect_exact(PROMPT)
        assert str(term.before).strip().splitlines()[-1] in ("8", "10")
        term.sendline("n")  # an actor method's last line: off its end, not into Ray
        term.expect_exact("work() returned; the process runs on")
        term.expect_exact("waiting for a breakpoint...")
        out, err = driver.communicate(timeout=120)
        assert driver.returncode == 0, err
        assert "task 33" in out and "actor [8, 10]" in out
        term.sendintr()
        term.expect(pexpect.EOF)
    finally:
        end_spawned(term)
        stop(driver)
