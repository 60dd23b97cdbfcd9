"""`ray job submit -- raydebug run --post-mortem -- python job.py`, with code shipped by
working_dir: the hub maps the job's paths to the client's checkout."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from helpers import run, wait_listing, write_script
from ray_cluster import free_port, ray_start_head

pytest.importorskip("ray")
pytestmark = [pytest.mark.integration, pytest.mark.timeout(600)]

from raydebug.client.dap import DapClient  # noqa: E402

# Loopback only, and the job's entrypoint (run by Ray's job supervisor, which inherits the
# cluster's environment) finds the `raydebug` command of this environment. Token auth with a
# token of the test's own (not ~/.ray/auth_token, which may not exist).
LOOPBACK = {"RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0", "RAY_AUTH_MODE": "token",
            "RAY_AUTH_TOKEN": os.environ.get("RAY_AUTH_TOKEN") or uuid.uuid4().hex,
            "PATH": os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", "")}

JOB = """
import ray
from helper import divide, double

ray.init()

@ray.remote(num_cpus=0)
def pause(x):
    return double(x)

@ray.remote(num_cpus=0, max_retries=0)
def fail(x):
    return divide(x)

print("result", ray.get(pause.remote(21)), flush=True)
print("again", ray.get(pause.remote(5)), flush=True)
try:
    ray.get(fail.remote(1))
except Exception as error:
    print("caught", type(error).__name__, flush=True)
"""

HELPER = """
def double(x):
    y = x * 2
    breakpoint()  # pause here
    z = y + 0
    return z  # break here

def divide(x):
    return x / 0
"""


@pytest.fixture(scope="module")
def cluster_with_jobs() -> Iterator[tuple[str, str]]:
    """A head node with its dashboard (the job server), as `ray start --head --block`: that
    one process owns the cluster, and stopping it stops every process of the cluster."""
    dashboard_port = free_port()
    with ray_start_head({**os.environ, **LOOPBACK}, f"--dashboard-port={dashboard_port}",
                        "--dashboard-host=127.0.0.1", "--include-dashboard=true") as head:
        yield head.gcs, f"http://127.0.0.1:{dashboard_port}"


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
             dashboard, "--working-dir", str(code), "--", "raydebug", "run", "--post-mortem",
             "--wait-timeout", "300", "--", "python", "job.py"],
            env={**os.environ, **LOOPBACK}, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
            text=True)
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


def wait_for_exception_session(hub: str, timeout: float = 120) -> dict[str, Any]:
    """The first post-mortem session the hub at ``hub`` lists: a long-poll of its sessions,
    which wakes when one comes or goes; ``TimeoutError`` after ``timeout``."""
    return dict(wait_listing(hub, "/api/sessions", "a post-mortem session", lambda listed: [
        s for s in listed if s["reason"] == "exception"], timeout)[0])


async def debug_the_cluster_with_local_paths(config: dict[str, Any], local_helper: str,
                                             break_line: int) -> None:
    """As VS Code does with the config `raydebug vscode --local-root` printed (no session):
    a breakpoint set on the parent in the local file reaches the next paused process
    (the hub maps the path), and the child's frames name the local file."""
    host, port = config["connect"]["host"], config["connect"]["port"]
    arguments = {k: v for k, v in config.items() if k not in ("type", "request")}
    parent = await DapClient.connect(host, port)
    await parent.initialize(supportsStartDebuggingRequest=True)
    attach = parent.send_request("attach", arguments)
    await parent.wait_event("initialized")
    await parent.request("setBreakpoints", {"source": {"path": local_helper},
                                            "breakpoints": [{"line": break_line}]})
    await parent.request("configurationDone")
    assert (await attach).success
    request = await parent.wait_reverse_request("startDebugging", timeout=120)
    configuration = request.arguments["configuration"]
    assert configuration["raydebug"]["localRoot"] == config["raydebug"]["localRoot"]
    child = await DapClient.connect(host, port)
    await child.initialize()
    stopped = await child.attach(**{k: v for k, v in configuration.items() if k != "request"})
    parent.respond(request)
    frames = await child.request("stackTrace", {"threadId": stopped.body["threadId"]})
    assert frames["stackFrames"][0]["source"]["path"] == local_helper
    await child.request("continue", {"threadId": stopped.body["threadId"]})
    hit = await child.wait_event("stopped", reason="breakpoint")
    frames = await child.request("stackTrace", {"threadId": hit.body["threadId"]})
    top = frames["stackFrames"][0]
    assert (top["source"]["path"], top["line"]) == (local_helper, break_line)
    await child.request("disconnect", {})
    await child.close()
    await parent.request("disconnect", {})
    await parent.close()


def test_job_submit_with_raydebug_run_and_path_mappings(cluster_with_jobs: tuple[str, str],
                                                        tmp_path: Path):
    gcs_address, dashboard = cluster_with_jobs
    code = tmp_path / "code"
    code.mkdir()
    write_script(code, "job.py", JOB)
    helper = write_script(code, "helper.py", HELPER)
    local_helper = str(helper.resolve())
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
        # The hub maps paths: the config names no _ray_pkg_<hash>, which the next
        # submission would change.
        assert config["raydebug"]["localRoot"] == str(code.resolve())
        assert "pathMappings" not in config and "_ray_pkg_" not in printed.stdout
        host, port = config["connect"]["host"], config["connect"]["port"]
        arguments = {k: v for k, v in config.items() if k not in ("name", "type", "request")}
        break_line = HELPER.lstrip().splitlines().index("    return z  # break here") + 1

        async def debug_with_local_paths() -> None:
            client = await DapClient.connect(host, port)
            await client.initialize()
            stopped = await client.attach(session["id"], **arguments)
            thread = stopped.body["threadId"]
            frames = await client.request("stackTrace", {"threadId": thread})
            # worker -> client: the client sees its own file
            assert frames["stackFrames"][0]["source"]["path"] == local_helper
            # client -> worker: a breakpoint set in the local file stops the worker
            answer = await client.request("setBreakpoints", {
                "source": {"path": local_helper}, "breakpoints": [{"line": break_line}]})
            assert answer["breakpoints"][0]["verified"], answer
            await client.request("continue", {"threadId": thread})
            hit = await client.wait_event("stopped", reason="breakpoint")
            frames = await client.request("stackTrace", {"threadId": hit.body["threadId"]})
            top = frames["stackFrames"][0]
            assert (top["source"]["path"], top["line"]) == (local_helper, break_line)
            await client.request("disconnect", {})
            await client.close()

        run(debug_with_local_paths())

        whole_cluster = json.loads(cli(*raydebug, "vscode", "--ray-address", gcs_address,
                                       "--local-root", str(code)).stdout)
        run(debug_the_cluster_with_local_paths(whole_cluster, local_helper, break_line),
            timeout=180)

        # --post-mortem travelled with the entrypoint: the failing task froze as a session.
        failed = wait_for_exception_session(f"{host}:{port}")
        assert failed["function"] == "divide" and "ZeroDivisionError" in failed["exception"]

        async def detach_from_the_failure() -> None:
            client = await DapClient.connect(host, port)
            await client.initialize()
            stopped = await client.attach(failed["id"], **arguments)
            frames = await client.request("stackTrace", {"threadId": stopped.body["threadId"]})
            assert frames["stackFrames"][0]["source"]["path"] == local_helper
            await client.request("disconnect", {})
            await client.close()

        run(detach_from_the_failure())
        out, _ = submit.communicate(timeout=240)
        assert submit.returncode == 0, out[-3000:]
        assert "result 42" in out and "again 10" in out and "caught" in out, out[-3000:]
    finally:
        if submit.poll() is None:
            submit.kill()
        submit.wait(timeout=30)
