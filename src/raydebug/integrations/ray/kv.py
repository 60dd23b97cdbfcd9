"""raydebug's entries in the GCS's KV (one namespace), and the one a worker reads at start.

The hub's record (``hub``) is :mod:`.discovery`'s. The cluster's breakpoints
(``breakpoints``) are here: the hub publishes each new set, and every worker's setup hook
reads it before the worker's first task, so this module is kept to what that read needs
(no dataclass, no other raydebug module: each import is ~0.4 ms of a worker's start).
"""

from __future__ import annotations

import json
from typing import Any

KV_NAMESPACE = b"raydebug"
KV_BREAKPOINTS_KEY = b"breakpoints"


def publish_breakpoints(wire: dict[str, Any] | None) -> None:
    """Publish the cluster's breakpoints as the hub has them now (None: there are none),
    for the workers that start later: their setup hook arms them before their first task
    (:func:`read_published_breakpoints`). The hub's seam ``Hub.publish_breakpoints``.

    Whoever may write the KV may already publish a hub of its own there, token included:
    this adds no one to those the workers trust."""
    from ray.experimental import internal_kv

    if wire is None:
        internal_kv._internal_kv_del(KV_BREAKPOINTS_KEY, namespace=KV_NAMESPACE)
    else:
        internal_kv._internal_kv_put(KV_BREAKPOINTS_KEY, json.dumps(wire).encode(),
                                     overwrite=True, namespace=KV_NAMESPACE)


def publish_breakpoints_of(hub: Any) -> None:
    """From now on, publish ``hub``'s breakpoints each time they change; first clear the set
    a hub that died before it left there."""
    publish_breakpoints(None)
    hub.publish_breakpoints = publish_breakpoints


def read_published_breakpoints() -> dict[str, Any] | None:
    """The cluster's breakpoints as published (see :func:`publish_breakpoints`); None when
    there are none, or what is there is not a set."""
    from ray.experimental import internal_kv

    data = internal_kv._internal_kv_get(KV_BREAKPOINTS_KEY, namespace=KV_NAMESPACE)
    if not data:
        return None
    try:
        wire = json.loads(data)
    except ValueError:
        return None
    return wire if isinstance(wire, dict) else None
