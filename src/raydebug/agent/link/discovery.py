"""The agent's one question to the cluster it runs in: where is the hub, and who am I?

Theory of operation. The agent asks the installed :class:`HubDiscovery` two things: whether
this process belongs to a cluster that can find (or start) the hub, so ``RAYDEBUG_HUB`` is
optional (:meth:`~HubDiscovery.in_cluster`, then :meth:`~HubDiscovery.find_hub` on every
(re)connect: the hub may have moved), and the process's identities in that cluster (job,
task, actor, node ids) that its sessions carry (:meth:`~HubDiscovery.process_identity`).

Until something installs another, :class:`LocalDiscovery` answers: no cluster (the hub is the
one ``RAYDEBUG_HUB``, ``RAYDEBUG_CLUSTER_HUB`` or the state file names, read by
:class:`~raydebug.agent.config.AgentConfig`), and the identities of the Ray task that
started this process, from ``RAYDEBUG_RAY_TASK``. A cluster integration installs its own
when it enables a process (Ray's: its Ray worker setup hook and driver hook), so the agent
never imports an integration, nor, through one, the hub or ray.

An installed discovery is inherited by a fork child, which must then answer for itself (a
Ray connection does not survive ``fork()``).
"""

from __future__ import annotations

import json
import os
from typing import Any, NamedTuple, Protocol

from ...errors import HubUnreachableError

# Set by a Ray worker for the processes it starts: the identities of the task starting them
# (JSON; see raydebug.integrations.ray.children).
RAY_TASK_VARIABLE = "RAYDEBUG_RAY_TASK"
RAY_FIELDS = ("job_id", "task_id", "task_name", "actor_id", "actor_class", "node_id",
              "node_ip", "worker_id", "attempt", "remote_root")


class HubAddress(NamedTuple):
    """Where the hub's agent listener is, and what proves it is the hub."""

    host: str
    port: int
    token: str
    cert: str | None  # the pinned fingerprint of its TLS certificate; None: no TLS


class HubDiscovery(Protocol):
    def in_cluster(self) -> bool:
        """Whether this process can find the hub through its cluster (so
        ``RAYDEBUG_HUB`` need not be set)."""

    def find_hub(self, stale: object = None, start: bool = True) -> HubAddress:
        """The cluster's hub, started if it has none (``start=False``: only found; the link
        asks so after a hub said it shut down for good). ``stale``: an address this returned
        that could not be reached (look past it). Asked only when :meth:`in_cluster`.
        Raises :class:`~raydebug.errors.HubUnreachableError`."""

    def process_identity(self) -> dict[str, Any]:
        """This process's identities in its cluster, among :data:`RAY_FIELDS` (a field
        that does not apply is absent or None); ``{}`` outside any cluster."""

    def left_cluster(self) -> bool:
        """Whether this process has left its cluster (a Ray driver after
        ``ray.shutdown()``): a hub lost or unreachable then is the cluster's going, not
        news; the link keeps trying quietly (the process may join again)."""


class LocalDiscovery:
    """No cluster to ask: the identities a Ray task passed to the process it started."""

    def in_cluster(self) -> bool:
        return False

    def find_hub(self, stale: object = None, start: bool = True) -> HubAddress:
        raise HubUnreachableError("this process is not part of a cluster that knows its hub")

    def process_identity(self) -> dict[str, Any]:
        inherited = inherited_task()
        return {name: inherited[name] for name in RAY_FIELDS if name in inherited}

    def left_cluster(self) -> bool:
        return False


def inherited_task() -> dict[str, Any]:
    """:data:`RAY_TASK_VARIABLE`, or ``{}`` when unset or not a JSON object."""
    try:
        fields = json.loads(os.environ.get(RAY_TASK_VARIABLE) or "{}")
    except ValueError:
        return {}
    return fields if isinstance(fields, dict) else {}


_installed: HubDiscovery = LocalDiscovery()


def install(discovery: HubDiscovery) -> None:
    """Make ``discovery`` this process's (and its fork children's) answer."""
    global _installed
    _installed = discovery


def installed() -> HubDiscovery:
    return _installed
