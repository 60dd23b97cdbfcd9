"""The CLI against a real Ray head node (`ray start --head --block` on loopback): the cluster's
hub wins over a local one, a fresh cluster gets its hub before the first pause, the hub the
first pause starts takes the job's hub options and blames no async actor for its start, and
the hub actor lets the head node stop promptly."""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pexpect
import pytest

from devtools.terminal import end_spawned
from helpers import HubProcess, attach, evaluate_and_continue, read_line, run, write_script
from ray_cluster import Head, first_contact_bound, ray_start_head
from raydebug.client.dap import DapClient

pytest.importorskip("ray")
pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]

# Loopback only; token auth with the test's own token (whether ~/.ray/auth_token exists or
# not, which changes what `ray start` does).
LOOPBACK = {"RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0", "RAY_AUTH_MODE": "token",
            "RAY_AUTH_TOKEN": os.environ.get("RAY_AUTH_TOKEN") or uuid.uuid4().hex,
            "PATH": os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", "")}
RAYDEBUG = [sys.executable, "-m", "raydebug"]

JOB = """
import ray

ray.init()

@ray.remote(num_cpus=0)
def pause(x):
    y = x * 2
    breakpoint()
    return y

print("result", ray.get(pause.remote(21)), flush=True)
"""


@pytest.fixture
def head() -> Iterator[Head]:
    """A head node of the test's own (token auth with the test's token)."""
    with ray_start_head({**os.environ, **LOOPBACK}) as started:
        yield started


def raydebug(*args: str, timeout: float = 120, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*RAYDEBUG, *args], capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, **LOOPBACK, **env})


def test_a_fresh_cluster_gets_its_hub_and_wins_over_the_local_one(head: Head, hub: HubProcess,
                                                                  tmp_path: Path):
    # `hub` is a hub started on this machine: it is in the state file (its own directory,
    # which every command here reads, as a user's would read theirs).
    state = {"XDG_STATE_HOME": str(hub.state)}
    local = raydebug("hub-address", **state)
    assert local.stdout.strip() == hub.client_address, local.stderr

    started = time.monotonic()
    listed = raydebug("list", RAY_ADDRESS=head.gcs, **state)
    took = time.monotonic() - started
    assert listed.returncode == 0, listed.stderr
    text = " ".join(listed.stdout.split())  # as one line, however the terminal wrapped it
    assert text.startswith("no sessions on the hub at "), listed.stdout
    assert f"the hub of the Ray cluster at {head.gcs}" in text, listed.stdout
    assert hub.client_address not in text, listed.stdout
    assert took < first_contact_bound(), took
    # The seconds the start takes are not spent silent; once started, nothing is said.
    assert listed.stderr.splitlines() == [
        f"raydebug: the Ray cluster at {head.gcs} has no raydebug hub yet: starting it (a "
        "few seconds, once)"], listed.stderr
    cluster_hub = re.search(r"on the hub at (\S+)", text)
    assert cluster_hub is not None
    address = raydebug("hub-address", "--ray-address", head.gcs, **state)
    assert address.stdout.strip() == cluster_hub.group(1), address.stderr
    assert "starting" not in address.stderr, address.stderr

    # Start the debugger first, then the job.
    child = pexpect.spawn(RAYDEBUG[0], [*RAYDEBUG[1:], "attach", "--follow"],
                          env={**os.environ, **LOOPBACK, "RAY_ADDRESS": head.gcs,
                               "TERM": "xterm", "NO_COLOR": "1", **state},
                          encoding="utf-8", timeout=90, dimensions=(24, 80))
    job = None
    try:
        child.expect_exact(f"waiting for a breakpoint... (hub {cluster_hub.group(1)}")
        script = write_script(tmp_path, "job.py", JOB)
        job = subprocess.Popen([*RAYDEBUG, "run", "--", sys.executable, str(script)],
                               env={**os.environ, **LOOPBACK, "RAY_ADDRESS": head.gcs, **state},
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        child.expect_exact("(raydebug) ")
        child.sendline("p y")
        child.expect_exact("42")
        child.sendline("c")
        output, _ = job.communicate(timeout=120)
        assert "result 42" in output, output[-2000:]
    finally:
        end_spawned(child)
        if job is not None and job.poll() is None:
            job.kill()
            job.wait(timeout=30)


def test_the_head_node_stops_promptly_with_the_hub_actor(head: Head):
    listed = raydebug("list", "--ray-address", head.gcs)  # starts the hub actor
    assert listed.returncode == 0 and "the hub of the Ray cluster" in listed.stdout, \
        listed.stderr
    started = time.monotonic()
    head.proc.send_signal(signal.SIGTERM)
    output, _ = head.proc.communicate(timeout=60)
    took = time.monotonic() - started
    # Without the actor's drain watch the node waited 30 s for the actor's lease; with it, a
    # few seconds: 20 leaves a loaded machine room and still tells the two apart.
    assert took < 20, f"{took:.1f} s: {output[-1500:]}"
    assert "did not finish draining" not in output


def test_the_hub_the_first_pause_starts_takes_the_jobs_hub_args(head: Head, tmp_path: Path):
    script = write_script(tmp_path, "job.py", JOB)
    job = subprocess.Popen(
        [*RAYDEBUG, "run", "--hub-args=--allow-terminate --max-sessions 7", "--",
         sys.executable, str(script)],
        env={**os.environ, **LOOPBACK, "RAY_ADDRESS": head.gcs}, stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT, text=True)
    try:
        # The job's first pause starts the hub actor (nothing started it before; `list`
        # would start it too, with its own environment).
        assert job.stdout is not None
        output = ""
        while "waiting for a debugger" not in output:
            line = read_line(job, timeout=120)
            assert line, output[-2000:]
            output += line
        # Found by use: "(hub agent port the cluster's hub)", the hub not yet found when
        # the notice was written; it names the agent port the worker linked to.
        assert re.search(r"waiting for a debugger: raydebug attach \w+ \(hub agent port "
                         r"[\d.]+:\d+\)", output), output[-2000:]
        listed = raydebug("list", "--ray-address", head.gcs, "--json")
        [session] = json.loads(listed.stdout)
        address = raydebug("hub-address", "--ray-address", head.gcs).stdout.strip()
        host, port = address.rsplit(":", 1)

        async def check() -> tuple[dict[str, Any], str]:
            client = await DapClient.connect(host, int(port))
            capabilities = await client.initialize()  # the hub answers it, from its config
            await client.close()
            seen = await evaluate_and_continue(host, int(port), session["id"], "y", 60)
            return capabilities, seen.result

        capabilities, y = run(check(), timeout=180)
        assert capabilities["supportsTerminateRequest"] is True
        assert capabilities["supportTerminateDebuggee"] is True
        assert y == "42"
        output, _ = job.communicate(timeout=120)
        assert "result 42" in output, output[-2000:]
    finally:
        if job.poll() is None:
            job.kill()
            job.wait(timeout=30)


def test_a_mistake_in_hub_args_is_said_before_the_job_starts(tmp_path: Path):
    done = raydebug("run", "--hub-args=--allow-terminat", "--", sys.executable, "-c",
                    "print('ran')")
    assert done.returncode == 1
    assert "ran" not in done.stdout
    assert done.stderr.startswith("raydebug: RAYDEBUG_HUB_ARGS: unrecognized arguments: "
                                  "--allow-terminat"), done.stderr


ASYNC_ACTOR_JOB = """
import asyncio
import ray

ray.init()

@ray.remote(num_cpus=0)
class Service:
    async def handle(self, x):
        await asyncio.sleep(0)
        y = x * 2
        breakpoint()
        return y

print("result", ray.get(Service.remote().handle.remote(21)), flush=True)
"""


def test_an_async_actors_first_pause_logs_no_blocking_get_warning(head: Head, tmp_path: Path):
    """The async actor's pause starts the hub actor and waits for it on raydebug's thread:
    Ray's "Using blocking ray.get inside async actor" would blame the user's code."""
    script = write_script(tmp_path, "job.py", ASYNC_ACTOR_JOB)
    job = subprocess.Popen([*RAYDEBUG, "run", "--", sys.executable, str(script)],
                           env={**os.environ, **LOOPBACK, "RAY_ADDRESS": head.gcs},
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        output = ""
        while "waiting for a debugger" not in output:  # the actor started the hub
            line = read_line(job, timeout=120)
            assert line, output[-2000:]
            output += line
        [session] = json.loads(raydebug("list", "--ray-address", head.gcs, "--json").stdout)
        assert session["actor_class"] == "Service", session
        host, port = raydebug("hub-address", "--ray-address", head.gcs).stdout.strip().rsplit(
            ":", 1)
        seen = run(evaluate_and_continue(host, int(port), session["id"], "y", 60), timeout=180)
        assert seen.result == "42"
        rest, _ = job.communicate(timeout=120)
        output += rest
        assert "result 42" in output, output[-2000:]
        assert "blocking ray.get inside async actor" not in output, output[-3000:]
    finally:
        if job.poll() is None:
            job.kill()
            job.wait(timeout=30)


@pytest.mark.parametrize("client", ["none", "attached"])
def test_the_head_node_stops_promptly_with_a_task_paused(head: Head, tmp_path: Path,
                                                        client: str):
    """A paused task holds its worker's lease: the hub actor, as its node drains, tells the
    agents it is going away, and they continue (else the node waits 30 s, then kills): a
    pause waiting for a debugger, and one suspended under an attached client."""
    script = write_script(tmp_path, "job.py", JOB)
    job = subprocess.Popen([*RAYDEBUG, "run", "--", sys.executable, str(script)],
                           env={**os.environ, **LOOPBACK, "RAY_ADDRESS": head.gcs},
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        output = ""
        while "waiting for a debugger" not in output:
            line = read_line(job, timeout=120)
            assert line, output[-2000:]
            output += line

        def stop_head() -> tuple[float, str]:
            started = time.monotonic()
            head.proc.send_signal(signal.SIGTERM)
            stopped, _ = head.proc.communicate(timeout=60)
            return time.monotonic() - started, stopped

        if client == "attached":
            host, port = raydebug("hub-address", "--ray-address", head.gcs).stdout.strip(
                ).rsplit(":", 1)

            async def stop_while_attached() -> tuple[float, str]:
                dap, stopped = await attach(host, int(port), None, timeout=60)
                assert stopped["reason"] in ("breakpoint", "pause", "step"), stopped
                try:
                    return await asyncio.to_thread(stop_head)
                finally:
                    await dap.close()

            took, stopped = run(stop_while_attached(), timeout=180)
        else:
            took, stopped = stop_head()
        assert took < 20, f"{took:.1f} s: {stopped[-1500:]}"  # not the lease's 30 s
        assert "did not finish draining" not in stopped
        rest, _ = job.communicate(timeout=60)
        output += rest
        # The task ran on and returned; the worker said why (its words reach the driver).
        assert "result 42" in output, output[-2000:]
        assert "shut down (its Ray node is stopping); continuing" in output, output[-2000:]
    finally:
        if job.poll() is None:
            job.kill()
            job.wait(timeout=30)
