"""RAYDEBUG_HUB_TLS=1 on a real local Ray: the hub actor serves workers over TLS and
publishes its certificate in the KV, where the workers find it and pin it."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from helpers import evaluate_and_continue, read_line, run, write_script

pytest.importorskip("ray")
pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]

DRIVER = """
import os, sys
os.environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = "0"  # stay on loopback
import ray
import raydebug
from raydebug.integrations import ray as ray_integration

# a cluster of its own: a plain ray.init() joins the one an earlier test's Cluster left named
# in ray_current_cluster (CI: "When connecting to an existing cluster, num_cpus ... must not")
ray.init(address="local", num_cpus=1, include_dashboard=False, log_to_driver=False,
         _node_ip_address="127.0.0.1", runtime_env=raydebug.runtime_env())

@ray.remote
def task(x):
    local = x + 1
    breakpoint()  # pause here
    return local * 10

ref = task.remote(4)
hub = ray_integration.wait_hub_info(120)
print("hub", hub.client, hub.cert, flush=True)
print("result", ray.get(ref, timeout=120), flush=True)
ray.shutdown()
"""


def test_the_hub_actor_serves_workers_over_tls_when_asked(tmp_path: Path):
    script = write_script(tmp_path, "driver.py", DRIVER)
    env = {**os.environ, "RAYDEBUG_HUB_TLS": "1", "RAYDEBUG_WAIT_TIMEOUT": "120"}
    driver = subprocess.Popen([sys.executable, str(script)], env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        words = read_line(driver, timeout=180).split()
        assert words[:1] == ["hub"], driver.stderr.read() if driver.poll() is not None else ""
        client, cert = words[1], words[2]
        assert cert.startswith("sha256:")  # published for the workers to pin
        host, port = client.rsplit(":", 1)

        # The oldest (only) waiting session; the worker reached the hub over TLS, pinned.
        evaluated = run(evaluate_and_continue(host, int(port), None, "local", timeout=120),
                        timeout=180)
        assert evaluated.result == "5"
        assert read_line(driver, timeout=120).split() == ["result", "50"]
        driver.wait(timeout=120)
        assert driver.returncode == 0
    finally:
        if driver.poll() is None:
            os.killpg(driver.pid, signal.SIGKILL)
            driver.wait(timeout=30)
