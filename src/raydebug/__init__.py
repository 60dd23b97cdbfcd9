"""raydebug: every paused Python process of a cluster, reachable through one port.

``breakpoint()`` with ``PYTHONBREAKPOINT=raydebug.set_trace`` pauses and registers a session
with the hub named by ``RAYDEBUG_HUB``; any DAP client connected to the hub can debug it.
"""

from __future__ import annotations

from .agent import install_excepthook, post_mortem, set_trace

__all__ = ["install_excepthook", "post_mortem", "set_trace"]
__version__ = "0.1.0"
