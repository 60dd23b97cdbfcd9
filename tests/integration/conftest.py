"""Fixtures the integration modules share (a real hub of the test's own is tests/conftest.py's
``hub``)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from devtools.terminal import Attach
from ray_cluster import loopback_cluster


@pytest.fixture
def attach() -> Iterator[list[Attach]]:
    """The ``raydebug attach`` terminals a test starts (:func:`devtools.terminal.start_attach`);
    each is killed, by its pid, at teardown."""
    started: list[Attach] = []
    yield started
    for session in started:
        session.close()


@pytest.fixture(scope="module")
def cluster(request: pytest.FixtureRequest) -> Iterator[Any]:
    """The module's real Ray cluster on loopback (a ``ray.cluster_utils.Cluster``, shared by
    its tests): one node per entry of the module's ``RAY_NODES``, the head first, each
    entry that node's arguments (``{"num_cpus": 1}`` alone when the module says nothing).
    Its jobs started under `raydebug run` link to the cluster's own hub
    (:func:`ray_cluster.hub_port`). Shut down after the module's last test; skips the
    module without Ray."""
    pytest.importorskip("ray")
    head, *nodes = getattr(request.module, "RAY_NODES", ({"num_cpus": 1},))
    with loopback_cluster(head, *nodes) as started:
        yield started
