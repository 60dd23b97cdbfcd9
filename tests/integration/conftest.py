"""Fixtures the integration modules share (a real hub of the test's own is tests/conftest.py's
``hub``)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from devtools.terminal import Attach
from ray_cluster import KeptCluster


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
    (:func:`ray_cluster.hub_port`). Kept running for the next module when that one asks for
    the same nodes (tests/conftest.py runs such modules one after another, on one worker:
    a cluster's start was 4-13 s of a loaded run's work), else shut down after the module's
    last test; skips the module without Ray."""
    pytest.importorskip("ray")
    nodes = ray_nodes(request.module)
    yield KEPT_CLUSTER.for_nodes(nodes)
    following = NEXT_TEST[0]
    if following is None or "cluster" not in getattr(following, "fixturenames", ()) or \
            ray_nodes(following.module) != nodes:  # type: ignore[attr-defined]
        KEPT_CLUSTER.stop()


def ray_nodes(module: Any) -> tuple[dict[str, Any], ...]:
    return tuple(getattr(module, "RAY_NODES", ({"num_cpus": 1},)))


KEPT_CLUSTER = KeptCluster()
NEXT_TEST: list[pytest.Item | None] = [None]  # the test this worker runs next, if any


@pytest.hookimpl(tryfirst=True)  # before the module's fixtures are finalized
def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None) -> None:
    NEXT_TEST[0] = nextitem


def pytest_sessionfinish() -> None:
    KEPT_CLUSTER.stop()  # after an interrupted run too
