"""raydebug inside Ray: the only package that imports ray. Its modules, by job:

- :mod:`.enable`: a job's ``runtime_env`` with raydebug's setup hook (``raydebug.runtime_env()``,
  ``raydebug run``'s ``RAY_RUNTIME_ENV_HOOK``);
- :mod:`.worker_hooks`: what runs in every enabled worker and driver (``breakpoint()``, Ray's
  post-mortem entry points, the hub discovery the agent asks);
- :mod:`.shipped_functions`: functions shipped by value, handed to the armed breakpoints of
  3.10/3.11 as cloudpickle rebuilds them in a worker;
- :mod:`.children`: what a worker exports to the processes it starts;
- :mod:`.discovery`: the hub published in the GCS's KV, and finding a cluster;
- :mod:`.cluster_auth`: Ray's token, used when a cluster asks for it;
- :mod:`.kv`: raydebug's KV namespace, and the cluster's breakpoints published there;
- :mod:`.hub_actor`: the hub as a detached actor, started once (the only one importing the hub);
- :mod:`.hub_starter`: the CLI's short-lived driver that starts it (and sends ``link``'s
  and ``stacks --native``'s tasks), in a child, bounded, kept to a loopback cluster's loopback;
- :mod:`.metadata`: a process's identities from Ray's runtime context;
- :mod:`.link_jobs`: ``raydebug link`` on a cluster: the running jobs' processes, linked
  from a task pinned to each of their nodes.
- :mod:`.node_stacks`: ``raydebug stacks --native`` on a cluster: py-spy run on each node
  by a task pinned there.

The names below stay importable from here (``RAY_RUNTIME_ENV_HOOK`` and
``worker_process_setup_hook`` name them by string), each module imported at its first use.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ...lazy_names import importer

# name -> its module: imported at first use, so that a worker's setup hook (named
# "raydebug.integrations.ray.setup_worker") imports only what it runs, not the hub lookup,
# the protocol and argparse (~10 ms of every worker's start; docs/design.md#live-link).
_EXPORTS = {
    **dict.fromkeys(("CHILD_VARIABLES", "prepare_children", "watch_children"), "children"),
    **dict.fromkeys(("GCS_CONNECT_TIMEOUT", "KV_HUB_KEY", "HubInfo", "connect_kv",
                     "find_gcs_address", "local_node_ip", "publish_cli_hub",
                     "publish_hub_info", "read_hub_info", "running_gcs_address",
                     "unpublish_hub_info",
                     "wait_hub_info"), "discovery"),
    **dict.fromkeys(("KV_NAMESPACE", "publish_breakpoints", "publish_breakpoints_of",
                     "read_published_breakpoints"), "kv"),
    **dict.fromkeys(("SETUP_HOOK", "ChainedSetupHook", "runtime_env", "runtime_env_hook"),
                    "enable"),
    **dict.fromkeys(("HUB_ACTOR_NAME", "HUB_ACTOR_NAMESPACE", "find_or_start_hub",
                     "hub_actor_class"), "hub_actor"),
    "find_or_start_cluster_hub": "hub_starter",
    **dict.fromkeys(("in_ray_worker", "node_ip", "session_fields"), "metadata"),
    **dict.fromkeys(("RayDiscovery", "install_driver_hook", "post_mortem",
                     "post_mortem_enabled", "setup_worker"), "worker_hooks"),
}


__getattr__ = importer(__name__, _EXPORTS, globals())


if TYPE_CHECKING:
    from .children import CHILD_VARIABLES, prepare_children, watch_children
    from .discovery import (
        GCS_CONNECT_TIMEOUT,
        KV_HUB_KEY,
        HubInfo,
        connect_kv,
        find_gcs_address,
        local_node_ip,
        publish_cli_hub,
        publish_hub_info,
        read_hub_info,
        running_gcs_address,
        unpublish_hub_info,
        wait_hub_info,
    )
    from .enable import SETUP_HOOK, ChainedSetupHook, runtime_env, runtime_env_hook
    from .hub_actor import HUB_ACTOR_NAME, HUB_ACTOR_NAMESPACE, find_or_start_hub, hub_actor_class
    from .hub_starter import find_or_start_cluster_hub
    from .kv import (
        KV_NAMESPACE,
        publish_breakpoints,
        publish_breakpoints_of,
        read_published_breakpoints,
    )
    from .metadata import in_ray_worker, node_ip, session_fields
    from .worker_hooks import (
        RayDiscovery,
        install_driver_hook,
        post_mortem,
        post_mortem_enabled,
        setup_worker,
    )

__all__ = [
    "CHILD_VARIABLES", "GCS_CONNECT_TIMEOUT", "HUB_ACTOR_NAME", "HUB_ACTOR_NAMESPACE",
    "KV_HUB_KEY", "KV_NAMESPACE", "SETUP_HOOK", "ChainedSetupHook", "HubInfo", "RayDiscovery",
    "connect_kv", "find_gcs_address", "find_or_start_cluster_hub", "find_or_start_hub",
    "hub_actor_class", "in_ray_worker", "install_driver_hook", "local_node_ip", "node_ip",
    "post_mortem", "post_mortem_enabled", "prepare_children", "publish_breakpoints",
    "publish_breakpoints_of",
    "publish_cli_hub", "publish_hub_info", "read_hub_info", "read_published_breakpoints",
    "running_gcs_address", "runtime_env", "runtime_env_hook", "session_fields", "setup_worker",
    "unpublish_hub_info",
    "wait_hub_info", "watch_children",
]
