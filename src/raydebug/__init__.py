"""raydebug: every paused Python process of a cluster, reachable through one port.

``breakpoint()`` with ``PYTHONBREAKPOINT=raydebug.set_trace`` pauses and registers a session
with the hub named by ``RAYDEBUG_HUB``; any DAP client connected to the hub can debug it.

Packages: ``protocol`` (sans-IO), ``agent`` (inside debugged processes), ``hub``, ``client``,
``terminal`` (``raydebug attach``), ``cli`` (the command), ``web`` (the page),
``integrations`` (Ray). Modules shared by several: ``session`` (what a session and a process
are, their state tables), ``process_record`` (what a process says about itself),
``errors`` (every exception), ``selectors`` (KEY=VALUE process
selectors), ``stack_tree`` (stacks merged across processes, odd among ``peer_groups``),
``outside_stacks`` (``stacks --native``: py-spy's reads merged in),
``views``,
``views_processes`` and ``views_snapshots`` (rendering for the terminal), ``state_file``
(this machine's hub and tunnel records), ``tls`` (certificates and pinning), ``tunnel``
(``raydebug tunnel``'s SSH),
``hub_options`` (``RAYDEBUG_HUB_ARGS``), ``lazy_names`` (a package's names imported at first
use), ``shell_command`` (how a hint names the command), ``gil_handoffs`` (the agent's
imports quick beside a busy thread); ``__main__`` runs the command.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .agent import install_excepthook, post_mortem, set_trace

__all__ = ["install_excepthook", "post_mortem", "runtime_env", "set_trace"]
_AGENT_NAMES = ("install_excepthook", "post_mortem", "set_trace")


def __getattr__(name: str) -> Any:
    """The agent's entry points, imported at first use: a command (``python -m raydebug``
    imports this package first) does not load the agent it does not run."""
    if name in _AGENT_NAMES:
        from .gil_handoffs import quick_gil_handoffs

        with quick_gil_handoffs():  # a first breakpoint() in a busy process: see there
            from . import agent

        return getattr(agent, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def runtime_env(base: dict[str, Any] | None = None, snapshots: bool = False) -> dict[str, Any]:
    """A Ray ``runtime_env`` (``base``, kept) that sends every worker's ``breakpoint()``
    and post-mortem to raydebug: ``ray.init(runtime_env=raydebug.runtime_env())``;
    ``snapshots=True``: a task that raises sends a snapshot and fails at once.

    Imports ray only when called, so ``import raydebug`` stays cheap without it.
    """
    from .integrations import ray as ray_integration

    return ray_integration.runtime_env(base, snapshots=snapshots)
__version__ = "0.1.0"
