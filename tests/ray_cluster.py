"""Real Ray on loopback for the tests: a multi-node ``Cluster`` in the test's process (the
integration modules' ``cluster`` fixture), or a head node of its own (`ray start --head`, as a
user starts one); jobs run under `raydebug run`, the cluster's own hub, and the `raydebug` CLI
run against them."""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

# Ray replaces 127.0.0.1 by the machine's network address unless told not to; tests stay
# on loopback.
LOOPBACK = {"RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0"}


@contextlib.contextmanager
def loopback_cluster(head: dict[str, Any], *nodes: dict[str, Any]) -> Iterator[Any]:
    """A ``ray.cluster_utils.Cluster``: the head with ``head``'s arguments and one node per
    ``nodes`` entry, all on 127.0.0.1, no dashboard; killed (and the environment put back)
    on exit."""
    saved = {name: os.environ.get(name) for name in LOOPBACK}
    os.environ.update(LOOPBACK)
    import ray.experimental.internal_kv
    from ray.cluster_utils import Cluster

    cluster = Cluster(initialize_head=True, head_node_args={
        "node_ip_address": "127.0.0.1", "include_dashboard": False, **head})
    try:
        for node in nodes:  # started together, then waited for together
            cluster.add_node(wait=False, node_ip_address="127.0.0.1", **node)
        cluster.wait_for_nodes()
        yield cluster
    finally:
        _HUB_PORTS.pop(cluster.address, None)
        # Killed, as Cluster.shutdown() does but without its grace (a SIGTERM to each of a
        # node's processes, then up to a second's wait for each kind: ~1 s a module, idle),
        # and with what the raylets started (workers, and Ray's agents, which outlived a
        # killed raylet by a minute and more).
        import psutil

        nodes = [node for node in (*cluster.worker_nodes, cluster.head_node) if node]
        started = []
        for node in nodes:
            for raylet in node.all_processes.get("raylet", ()):
                with contextlib.suppress(psutil.Error):
                    started += psutil.Process(raylet.process.pid).children(recursive=True)
        for node in nodes:
            cluster.remove_node(node, allow_graceful=False)
        _kill(started)
        ray.experimental.internal_kv._internal_kv_reset()
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


class KeptCluster:
    """The one :func:`loopback_cluster` a test process keeps running from module to module:
    started for the nodes a module asks for, handed as it is to a module that asks for the
    same nodes, shut down when one asks for others, or by :meth:`stop`."""

    def __init__(self) -> None:
        self._running = contextlib.ExitStack()
        self._nodes: tuple[dict[str, Any], ...] = ()
        self._cluster: Any = None

    def for_nodes(self, nodes: tuple[dict[str, Any], ...]) -> Any:
        """A cluster of ``nodes`` (the head first, as :func:`loopback_cluster` takes them)."""
        if self._cluster is None or nodes != self._nodes:
            self.stop()
            self._cluster = self._running.enter_context(loopback_cluster(*nodes))
            self._nodes = nodes
        return self._cluster

    def stop(self) -> None:
        self._cluster, self._nodes = None, ()
        self._running.close()


def _kill(processes: list[Any]) -> None:
    """SIGKILL each of ``processes`` (psutil's) that is still there."""
    import psutil

    for process in processes:
        with contextlib.suppress(psutil.Error):
            process.kill()


def raydebug_cli(*args: str, timeout: float = 180) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "raydebug", *args], capture_output=True,
                          text=True, timeout=timeout, env={**os.environ, **LOOPBACK})


def start_job(job: Path, address: str, *args: str) -> subprocess.Popen[str]:
    """``raydebug run -- python JOB ADDRESS [ARGS...]``: a driver of the cluster at
    ``address`` whose workers are linked; its output piped, as text. The caller stops it."""
    return subprocess.Popen(
        [sys.executable, "-m", "raydebug", "run", "--", sys.executable, str(job), address,
         *args],
        env={**os.environ, **LOOPBACK, "PYTHONUNBUFFERED": "1"}, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True)


def hub_port(address: str) -> int:
    """The client port of the hub of the cluster at ``address``: the cluster's own hub, which
    this starts when no job or command has yet (`raydebug vscode --ray-address`). Asked
    once per cluster: the hub actor lives as long as its cluster (a command's start and
    Ray's import were ~2 s of a CPU each time a module's test asked again)."""
    if address not in _HUB_PORTS:
        found = raydebug_cli("vscode", "--ray-address", address)
        assert found.returncode == 0, found.stderr
        _HUB_PORTS[address] = int(json.loads(found.stdout)["connect"]["port"])
    return _HUB_PORTS[address]


_HUB_PORTS: dict[str, int] = {}  # a running cluster's (forgotten as it shuts down)


def get(port: int, path: str) -> Any:
    """``GET path`` of the hub on loopback ``port``: its JSON."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=60) as response:
        return json.loads(response.read())


def post(port: int, path: str, body: Any) -> tuple[int, Any]:
    """``POST path`` of ``body`` as JSON to the hub on loopback ``port``: its status and
    JSON answer (an error's too)."""
    request = urllib.request.Request(f"http://127.0.0.1:{port}{path}",
                                     data=json.dumps(body).encode(), method="POST")
    try:
        with urllib.request.urlopen(request, timeout=60) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())


def process_running(port: int, function: str) -> dict[str, Any] | None:
    """The record of a process of the hub at ``port`` one of whose threads is in
    ``function`` now (its stacks, read without pausing it), or None."""
    for entry in get(port, "/api/stacks?timeout=5")["processes"]:
        for thread in entry["threads"]:
            if any(frame["function"] == function for frame in thread["frames"]):
                return dict(entry["process"])
    return None


def session_in(address: str, process_id: str, function: str) -> dict[str, Any] | None:
    """The session ``raydebug list`` shows for ``process_id`` stopped in ``function`` (the
    Ray cluster at ``address``), or None."""
    listed = json.loads(raydebug_cli("list", "--json", "--ray-address", address).stdout)
    return next((s for s in listed if s["process"] == process_id
                 and s["function"] == function), None)


def free_port() -> int:
    """A TCP port free on loopback now (for Ray's options that take no 0)."""
    return free_ports(1)[0]


def free_ports(count: int) -> list[int]:
    """``count`` different TCP ports free on loopback now: each probe is held until all are
    taken (one at a time, the kernel may hand the same port out twice: Ray then refused to
    start, 'node_manager is trying to use a port number 51955 that is used by other
    components', the object manager's)."""
    with contextlib.ExitStack() as held:
        probes = [held.enter_context(socket.socket()) for _ in range(count)]
        for probe in probes:
            probe.bind(("127.0.0.1", 0))
        return [int(probe.getsockname()[1]) for probe in probes]


@dataclasses.dataclass
class Head:
    """A head node started by :func:`ray_start_head`."""

    proc: subprocess.Popen[str]
    gcs: str  # its GCS address, 127.0.0.1:PORT
    output: str  # what `ray start` said until the head was up


@contextlib.contextmanager
def ray_start_head(env: dict[str, str], *options: str) -> Iterator[Head]:
    """`ray start --head --block` on 127.0.0.1 with one CPU, no dashboard unless ``options``
    ask for it, free ports and a temp dir of its own: short, since Ray's Unix sockets live
    under it and their paths are limited to 107 bytes (pytest's temp dirs are too long).

    Killed by its pid, and with it the cluster's processes (they name the temp dir): never
    `ray stop`, which stops every Ray of the machine, other tests' too. Fails the test with
    what Ray said when the head does not start."""
    import psutil

    temp_dir = tempfile.mkdtemp(prefix="rdray")
    gcs_port, agent_port, node_manager_port, object_manager_port, client_port = free_ports(5)
    proc = subprocess.Popen(
        [sys.executable, "-m", "ray.scripts.scripts", "start", "--head", "--block",
         f"--port={gcs_port}", "--node-ip-address=127.0.0.1", "--num-cpus=1",
         f"--temp-dir={temp_dir}", f"--dashboard-agent-listen-port={agent_port}",
         f"--node-manager-port={node_manager_port}",
         f"--object-manager-port={object_manager_port}",
         f"--ray-client-server-port={client_port}",
         *(options or ("--include-dashboard=false",))],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    assert proc.stdout is not None
    try:
        output = ""
        for line in proc.stdout:  # "Ray runtime started." once the head is up
            output += line
            if "Ray runtime started" in line:
                break
        else:
            pytest.fail(f"ray start --head did not start: {output[-2000:]}")
        yield Head(proc, f"127.0.0.1:{gcs_port}", output)
    finally:
        # Killed, not stopped: Ray's own stop (SIGTERM) drains the node and gives each of its
        # processes a grace period, 2-5 s of waiting after a test's job (30 s with the
        # dashboard); the tests that time a head's stop stop it themselves. Its processes:
        # those it started (Ray's agents name no temp dir once they have set their titles,
        # "ray::DashboardAgent") and those naming the temp dir (a worker whose raylet ended).
        cluster = []
        if proc.poll() is None:  # its pid still its own
            with contextlib.suppress(psutil.Error):
                cluster = psutil.Process(proc.pid).children(recursive=True)
        proc.kill()
        proc.wait(timeout=30)
        cluster += [left for left in psutil.process_iter(["cmdline"])
                    if any(temp_dir in part for part in left.info["cmdline"] or ())]
        _kill(cluster)
        shutil.rmtree(temp_dir, ignore_errors=True)
        _HUB_PORTS.pop(f"127.0.0.1:{gcs_port}", None)


def first_contact_bound() -> float:
    """How long a first command may take against a cluster with no hub yet: the product's
    own bounds for starting that hub (Ray's connect, then the hub's start), and a margin.
    Past them it hangs, the defect this bound catches (2-3 min of retries at an address Ray
    had rewritten). Not a speed goal: how fast the start is, is the benchmarks' to say.
    (A function: the module that has the bounds imports Ray, which conftest does not.)"""
    from raydebug.integrations.ray.hub_starter import HUB_WAIT_TIMEOUT, RAY_CONNECT_TIMEOUT

    return RAY_CONNECT_TIMEOUT + HUB_WAIT_TIMEOUT + 15.0
