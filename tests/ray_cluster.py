"""One way to start a real multi-node Ray on loopback for a test module, and to run the
`raydebug` CLI against it."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

# Ray replaces 127.0.0.1 by the machine's network address unless told not to; tests stay
# on loopback.
LOOPBACK = {"RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0"}


@contextlib.contextmanager
def loopback_cluster(head: dict[str, Any], *nodes: dict[str, Any]) -> Iterator[Any]:
    """A ``ray.cluster_utils.Cluster``: the head with ``head``'s arguments and one node per
    ``nodes`` entry, all on 127.0.0.1, no dashboard; shut down (and the environment put
    back) on exit."""
    saved = {name: os.environ.get(name) for name in LOOPBACK}
    os.environ.update(LOOPBACK)
    from ray.cluster_utils import Cluster

    cluster = Cluster(initialize_head=True, head_node_args={
        "node_ip_address": "127.0.0.1", "include_dashboard": False, **head})
    try:
        for node in nodes:
            cluster.add_node(node_ip_address="127.0.0.1", **node)
        cluster.wait_for_nodes()
        yield cluster
    finally:
        cluster.shutdown()
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def raydebug_cli(*args: str, timeout: float = 180) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "raydebug", *args], capture_output=True,
                          text=True, timeout=timeout, env={**os.environ, **LOOPBACK})
