"""raydebug: every paused Python process of a cluster, reachable through one port.

``breakpoint()`` with ``PYTHONBREAKPOINT=raydebug.set_trace`` pauses and registers a session
with the hub named by ``RAYDEBUG_HUB``; any DAP client connected to the hub can debug it.
"""

from __future__ import annotations

from typing import Any

from .agent import install_excepthook, post_mortem, set_trace

__all__ = ["install_excepthook", "post_mortem", "runtime_env", "set_trace"]


def runtime_env(base: dict[str, Any] | None = None) -> dict[str, Any]:
    """A Ray ``runtime_env`` (``base``, kept) that sends every worker's ``breakpoint()``
    and post-mortem to raydebug: ``ray.init(runtime_env=raydebug.runtime_env())``.

    Imports ray only when called, so ``import raydebug`` stays cheap without it.
    """
    from .integrations import ray as ray_integration

    return ray_integration.runtime_env(base)
__version__ = "0.1.0"
