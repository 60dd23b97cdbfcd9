"""Enabling raydebug in a Ray job: a ``runtime_env`` that runs raydebug's worker setup hook.

Theory of operation. Enabling adds two things to a job's ``runtime_env`` and keeps everything
the user put there: a ``worker_process_setup_hook`` (:data:`SETUP_HOOK`, after the user's
own: :class:`ChainedSetupHook`) and raydebug's env vars. Three ways, all the same underneath:
:func:`runtime_env` for code, :func:`runtime_env_hook` for ``RAY_RUNTIME_ENV_HOOK`` (used by
``raydebug run``), and ``ray job submit -- raydebug run``. Called in a driver, it also routes
the driver's own ``breakpoint()``, and says once that Ray's own debugger settings, if set, do
nothing now (:func:`ray_debugger_notice`).
"""

from __future__ import annotations

import functools
import os
import sys
from collections.abc import Mapping
from typing import Any

from ...agent.flags import is_on
from .worker_hooks import LIVE_IN_RAY, install_driver_hook, live_wanted, setup_worker

SETUP_HOOK = "raydebug.integrations.ray.setup_worker"
# Ray's own debugger: RAY_DEBUG=1 (debugpy in the worker; "legacy": its remote pdb) and the
# interface it listens on. Many scripts set them; raydebug's hook replaces that debugger.
RAY_DEBUGGER_SETTINGS = ("RAY_DEBUG", "RAY_DEBUGGER_HOST")


def runtime_env(base: dict[str, Any] | None = None, snapshots: bool = False) -> dict[str, Any]:
    """Return ``base`` (a runtime_env, possibly None) with raydebug enabled in every worker.

    The user's env_vars, working_dir, pip, and setup hook are kept; a setup hook of theirs
    runs first, then raydebug's. Called in a driver, it also routes the driver's own
    ``breakpoint()`` (see :func:`install_driver_hook`). ``snapshots``: a failing task sends
    a snapshot (``RAYDEBUG_SNAPSHOTS=1`` in every worker).
    """
    env = dict(base or {})
    env_vars = {str(k): str(v) for k, v in (env.get("env_vars") or {}).items()}
    if snapshots:
        env_vars["RAYDEBUG_SNAPSHOTS"] = "1"
    for name in ("RAYDEBUG_POST_MORTEM", "RAYDEBUG_SNAPSHOTS", "RAYDEBUG_WAIT_TIMEOUT",
                 "RAYDEBUG_HUB", "RAYDEBUG_TOKEN", "RAYDEBUG_TOKEN_FILE", "RAYDEBUG_HUB_CERT",
                 "RAYDEBUG_HUB_TLS", "RAYDEBUG_HUB_ARGS", "RAYDEBUG_LABELS"):
        if name in os.environ:
            env_vars.setdefault(name, os.environ[name])
    # Workers link at start through the setup hook (RAYDEBUG_LIVE=0 turns it off).
    env_vars.setdefault("RAYDEBUG_LIVE", "1" if live_wanted() else "0")
    if is_on(env_vars["RAYDEBUG_LIVE"]):
        env_vars["RAYDEBUG_LIVE"] = LIVE_IN_RAY  # not through the .pth: Ray is not up yet
    env["env_vars"] = env_vars
    notice = ray_debugger_notice(os.environ, env_vars)
    if notice:
        _say_once(notice)
    user_hook = env.get("worker_process_setup_hook")
    if user_hook is None or user_hook == SETUP_HOOK:
        env["worker_process_setup_hook"] = SETUP_HOOK
    elif not isinstance(user_hook, ChainedSetupHook):
        env["worker_process_setup_hook"] = ChainedSetupHook(user_hook)
    install_driver_hook()
    return env


def ray_debugger_notice(environ: Mapping[str, str], env_vars: Mapping[str, str]) -> str:
    """The line that says Ray's own debugger settings set in the driver's ``environ`` or
    the job's ``env_vars`` do nothing (empty when none is set): raydebug handles
    ``breakpoint()``, and paused processes listen on no port (they dial out to the hub,
    whose debugger port is on loopback), whatever ``RAY_DEBUGGER_HOST`` says."""
    found = {name: value.strip() for source in (environ, env_vars)
             for name, value in source.items() if name in RAY_DEBUGGER_SETTINGS}
    settings = [f"{name}={value}" for name, value in sorted(found.items())
                if value not in ("", "0")]
    if not settings:
        return ""
    return (f"raydebug: {' and '.join(settings)} (Ray's own debugger) ignored: raydebug "
            "handles breakpoint() and no debugger listens beyond loopback; `raydebug list` shows "
            "what is paused")


@functools.cache
def _say_once(line: str) -> None:
    """Print ``line`` on stderr, once per process (the hook may run at each ray.init)."""
    print(line, file=sys.stderr, flush=True)


def runtime_env_hook(base: dict[str, Any] | None) -> dict[str, Any]:
    """``RAY_RUNTIME_ENV_HOOK`` target: Ray passes the driver's runtime_env through it."""
    return runtime_env(base)


class ChainedSetupHook:
    """The user's worker setup hook (a callable or a ``module.function`` name), then ours."""

    def __init__(self, user_hook: Any) -> None:
        self.user_hook = user_hook

    def __call__(self) -> None:
        hook = self.user_hook
        if isinstance(hook, str):
            module_name, _, function = hook.rpartition(".")
            hook = getattr(__import__(module_name, fromlist=[function]), function)
        hook()
        setup_worker()
