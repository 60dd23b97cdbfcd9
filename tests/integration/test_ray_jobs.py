"""`ray job submit -- raydebug run -- python job.py`, with code shipped by working_dir."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from helpers import run, write_script

pytest.importorskip("ray")
pytestmark = [pytest.mark.integration, pytest.mark.timeout(600)]

from raydebug.client.dap import DapClient  # noqa: E402

# Loopback only, and the job's entrypoint (run by Ray's job supervisor, which inherits the
# cluster's environment) finds the `raydebug` command of this environment.
LOOPBACK = {"RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0", "RAY_AUTH_MODE": "token",
            "PATH": os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", "")}

JOB = """
import ray
from helper import double

ray.init()

@ray.remote(num_cpus=0)
def pause(x):
    return double(x)

print("result", ray.get(pause.remote(21)), flush=True)
"""

HELPER = """
def double(x):
    y = x * 2
    breakpoint()  # pause here
    return y
"""


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.fixture(scope="module")
def cluster_with_jobs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, str]]:
    """A head node with its dashboard (the job server), as `ray start --head --block`: that
    one process owns the cluster, and stopping it stops every process of the cluster."""
    gcs_port, dashboard_port, agent_port = free_port(), free_port(), free_port()
    temp_dir = tmp_path_factory.mktemp("ray")
    head = subprocess.Popen(
        [sys.executable, "-m", "ray.scripts.scripts", "start", "--head", "--block",
         f"--port={gcs_port}", f"--dashboard-port={dashboard_port}",
         "--dashboard-host=127.0.0.1", "--node-ip-address=127.0.0.1", "--num-cpus=1",
         "--include-dashboard=true", f"--temp-dir={temp_dir}",
         f"--dashboard-agent-listen-port={agent_port}"],
        env={**os.environ, **LOOPBACK}, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
        text=True)
    assert head.stdout is not None
    try:
        for line in head.stdout:  # "Ray runtime started." once the head is up
            if "Ray runtime started" in line:
                break
        else:
            pytest.fail("ray start --head did not start")
        yield f"127.0.0.1:{gcs_port}", f"http://127.0.0.1:{dashboard_port}"
    finally:
        head.send_signal(signal.SIGTERM)
        try:
            head.wait(timeout=60)
        except subprocess.TimeoutExpired:
            head.kill()
            head.wait(timeout=30)


def cli(*args: str, timeout: float = 240) -> subprocess.CompletedProcess[str]:
    return subprocess.run(list(args), capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, **LOOPBACK, "RAY_ADDRESS": ""})


def submit_when_the_job_agent_is_up(dashboard: str, code: Path) -> subprocess.Popen[str]:
    """`ray job submit -- raydebug run -- python job.py`, retried while the cluster's job
    agent is still starting ("No available agent"): Ray offers nothing to wait on."""
    deadline = time.monotonic() + 90
    while True:
        submit = subprocess.Popen(
            [sys.executable, "-m", "ray.scripts.scripts", "job", "submit", "--address",
             dashboard, "--working-dir", str(code), "--", "raydebug", "run", "--", "python",
             "job.py"], env={**os.environ, **LOOPBACK}, stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT, text=True)
        assert submit.stdout is not None
        output = ""
        for line in submit.stdout:  # until the job is accepted, or the command fails
            output += line
            if "submitted successfully" in line:
                return submit
        submit.wait(timeout=30)
        if "No available agent" not in output or time.monotonic() > deadline:
            pytest.fail(f"ray job submit failed: {output[-1500:]}")
        time.sleep(1)


def test_job_submit_with_raydebug_run_and_path_mappings(cluster_with_jobs: tuple[str, str],
                                                        tmp_path: Path):
    gcs_address, dashboard = cluster_with_jobs
    code = tmp_path / "code"
    code.mkdir()
    write_script(code, "job.py", JOB)
    write_script(code, "helper.py", HELPER)
    raydebug = [sys.executable, "-m", "raydebug"]
    submit = submit_when_the_job_agent_is_up(dashboard, code)
    try:
        listed = cli(*raydebug, "list", "--ray-address", gcs_address, "--json",
                     "--wait", "1", "--timeout", "120")
        if listed.returncode != 0 and submit.poll() is not None:
            pytest.fail(f"the job ended early: {submit.communicate()[0][-1500:]}")
        assert listed.returncode == 0, listed.stderr
        [session] = json.loads(listed.stdout)
        remote_root = session["remote_root"]
        assert remote_root and "working_dir_files" in remote_root
        assert session["file"] == os.path.join(remote_root, "helper.py")

        printed = cli(*raydebug, "vscode", "--ray-address", gcs_address,
                      "--session", session["id"], "--local-root", str(code))
        config = json.loads(printed.stdout)
        assert config["pathMappings"] == [{"localRoot": str(code.resolve()),
                                           "remoteRoot": remote_root}]

        async def attach_with_the_printed_config() -> None:
            client = await DapClient.connect(config["connect"]["host"], config["connect"]["port"])
            await client.initialize()
            arguments = {k: v for k, v in config.items() if k not in ("name", "type", "request")}
            stopped = await client.attach(session["id"], **arguments)
            frames = await client.request("stackTrace", {"threadId": stopped.body["threadId"]})
            top = frames["stackFrames"][0]
            # pathMappings applied by debugpy: the client sees its own local file.
            assert top["source"]["path"] == str((code / "helper.py").resolve())
            await client.request("disconnect", {})
            await client.close()

        run(attach_with_the_printed_config())
        out, _ = submit.communicate(timeout=240)
        assert submit.returncode == 0, out[-3000:]
        assert "result 42" in out
    finally:
        if submit.poll() is None:
            submit.kill()
        submit.wait(timeout=30)
