"""``raydebug stacks --native`` on a Ray cluster: py-spy run on each node, by a task there.

Theory of operation. py-spy reads a process of its own machine only (ptrace). For the Ray
processes that did not answer, the CLI's child driver (:func:`.hub_starter.run_in_driver`,
as ``raydebug link``'s: bounded, ended by Ctrl-C, kept to a loopback cluster's loopback)
sends one task to each of their nodes, pinned there (``NodeAffinitySchedulingStrategy``,
``num_cpus=0``: it waits for no CPU a job holds), which runs
:func:`raydebug.outside_stacks.read_pids` on the node's pids and returns the node's
:class:`~raydebug.outside_stacks.Reading`. The task runs as Ray's workers, so it has their
ptrace rights. Every node gets an answer within the same bound: its reading, or its
``failure`` (the task failed, or did not end in time and was cancelled).
"""

from __future__ import annotations

import json
from typing import Any

import ray
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

from ...errors import RaydebugError
from ...outside_stacks import Reading, read_pids, reading_bound

# Seconds a node's task may take beyond py-spy's own bound: a worker to start for it on a
# loaded node (1-2 s idle, more under load).
TASK_START_TIMEOUT = 30.0
# And the child driver beyond its tasks: asking for them, the answer's way back.
DRIVER_WORK_EXTRA = 10.0


@ray.remote(num_cpus=0)
def read_on_this_node(pids: list[int], timeout: float) -> dict[str, Any]:
    """Ray task, pinned to a node: py-spy's dumps of ``pids`` there, as JSON."""
    return read_pids(pids, timeout).to_json()


def tasks_bound(nodes: dict[str, list[int]], timeout: float) -> float:
    """How long the nodes' tasks may take, all of them at once (seconds)."""
    most = max((len(pids) for pids in nodes.values()), default=0)
    return reading_bound(most, timeout) + TASK_START_TIMEOUT


def read_from_driver(argument: str) -> dict[str, Any]:
    """In the child driver of :func:`read_on_nodes` (``argument``: its JSON): a task on
    each node; ``{"nodes": {node id: its Reading as JSON}}``."""
    asked = json.loads(argument)
    nodes: dict[str, list[int]] = asked["nodes"]
    timeout = float(asked["timeout"])
    calls = {node: read_on_this_node.options(
                 scheduling_strategy=NodeAffinitySchedulingStrategy(node, soft=False)
             ).remote(pids, timeout) for node, pids in nodes.items()}
    bound = tasks_bound(nodes, timeout)
    ready, _ = ray.wait(list(calls.values()), num_returns=len(calls), timeout=bound)
    readings = {}
    for node, call in calls.items():
        if call not in ready:
            reading = Reading(failure=f"its task did not finish within {bound:g} s")
            ray.cancel(call, force=True)
        else:
            try:
                done: dict[str, Any] = ray.get(call, timeout=bound)
                reading = Reading.from_json(done)
            except Exception as error:  # the task failed (the node died, Ray's errors)
                said = str(error).strip().splitlines()[-1:] or [type(error).__name__]
                reading = Reading(failure=f"its task failed: {said[0][:200]}")
        readings[node] = reading.to_json()
    return {"nodes": readings}


def read_on_nodes(gcs: str, nodes: dict[str, list[int]], timeout: float) -> dict[str, Reading]:
    """py-spy's reading of ``nodes``' pids (``{node id: pids}``) on each node of the
    cluster at ``gcs`` (reached by :func:`~.discovery.connect_kv`), by a task pinned there;
    every node has its :class:`Reading` (its ``failure`` when the child driver could not
    ask it). Bounded; never raises for want of Ray."""
    from .hub_starter import driver_keeps_to_loopback, run_in_driver

    try:
        answer = run_in_driver(
            gcs, driver_keeps_to_loopback(gcs), f"{__name__}:read_from_driver",
            json.dumps({"nodes": nodes, "timeout": timeout}), "run py-spy on its nodes",
            tasks_bound(nodes, timeout) + DRIVER_WORK_EXTRA,
            f"this machine could not {{step}} (the Ray cluster at {gcs})")
    except RaydebugError as error:
        return {node: Reading(failure=str(error)) for node in nodes}
    readings = answer.get("nodes") or {}
    return {node: Reading.from_json(readings[node]) if node in readings
            else Reading(failure="no answer for it") for node in nodes}
