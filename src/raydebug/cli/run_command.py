"""``raydebug run``: start a Ray driver with raydebug enabled in it and in every worker."""

from __future__ import annotations

import os
import shutil

import click

from ..errors import ConfigurationError
from .locate import explicit_ray_address

# Ray's driver folds log lines that differ only in words with digits into one, and says
# "[repeated 6x across cluster]" only when the job ends: every pause notice but the first
# ("raydebug: session <id> paused at ...") would be hidden. Lines matching Ray's allow regex
# are never folded.
NEVER_FOLD = r"raydebug: "


def never_fold(allow: str | None) -> str:
    """Ray's ``RAY_DEDUP_LOGS_ALLOW_REGEX`` that also keeps raydebug's lines (a user's own
    pattern, if set, still applies)."""
    return f"(?:{allow})|{NEVER_FOLD}" if allow else NEVER_FOLD


@click.command(context_settings={"ignore_unknown_options": True,
                                 "allow_interspersed_args": False})
@click.option("--post-mortem", is_flag=True,
              help="A task or actor method that raises freezes in the frame that raised, as "
                   "a session (RAYDEBUG_POST_MORTEM=1 for the driver and every worker).")
@click.option("--snapshots", is_flag=True,
              help="A task, actor method or thread that raises sends a snapshot of its "
                   "frames and locals to the hub and fails at once, as without raydebug "
                   "(RAYDEBUG_SNAPSHOTS=1 for the driver and every worker).")
@click.option("--wait-timeout", type=click.FloatRange(min=0), default=None, metavar="SECONDS",
              help="A paused process nobody attached to continues after SECONDS "
                   "(RAYDEBUG_WAIT_TIMEOUT).")
@click.option("--live/--no-live", default=True, show_default=True,
              help="Link the driver and every worker to the hub from their start, so "
                   "`raydebug ps`, `stacks` and `pause` reach them (RAYDEBUG_LIVE; "
                   "RAYDEBUG_LIVE=0 in the environment turns it off too).")
@click.option("--hub-args", default=None, metavar="OPTIONS",
              help="Options of `raydebug hub` for the hub the first pause starts, e.g. "
                   "--hub-args=--allow-terminate (RAYDEBUG_HUB_ARGS; a hub already running "
                   "keeps its own).")
@click.argument("command", nargs=-1, required=True, type=click.UNPROCESSED)
def run(post_mortem: bool, snapshots: bool, wait_timeout: float | None, live: bool,
        hub_args: str | None, command: tuple[str, ...]) -> None:
    """Run a Ray driver with raydebug on: `raydebug run -- python job.py`.

    No code change: every worker's breakpoint() and post-mortem go to the cluster's hub
    (found or started on the head node when the driver connects to Ray), and every process
    is linked to it live. The driver's own breakpoint() opens pdb
    when its stdin is a terminal, else (or with RAYDEBUG_DRIVER=remote) a session.

    The options travel with the command, so under `ray job submit -- raydebug run
    --post-mortem -- python job.py` they reach the job (the submitter's environment does
    not).
    """
    env = {**os.environ, **named_cluster_environment()}
    env["RAY_RUNTIME_ENV_HOOK"] = "raydebug.integrations.ray.runtime_env_hook"
    env["RAYDEBUG_RAY_DRIVER"] = "1"
    env["RAY_DEDUP_LOGS_ALLOW_REGEX"] = never_fold(env.get("RAY_DEDUP_LOGS_ALLOW_REGEX"))
    if post_mortem:
        env["RAYDEBUG_POST_MORTEM"] = "1"
    if snapshots:
        env["RAYDEBUG_SNAPSHOTS"] = "1"
    if not live:
        env["RAYDEBUG_LIVE"] = "0"
    if wait_timeout is not None:
        env["RAYDEBUG_WAIT_TIMEOUT"] = f"{wait_timeout:g}"
    if hub_args is not None:
        env["RAYDEBUG_HUB_ARGS"] = hub_args
        from ..hub_options import hub_options_wanted

        hub_options_wanted(env)  # a mistake is said here, not at the first pause
    program = shutil.which(command[0])
    if program is None:
        raise ConfigurationError(f"command not found: {command[0]}")
    os.execve(program, list(command), env)


def named_cluster_environment() -> dict[str, str]:
    """What the driver of the cluster ``RAY_ADDRESS`` names needs to connect, as the other
    commands do: Ray's token when the cluster asks for it, loopback kept (see
    :func:`~raydebug.integrations.ray.discovery.driver_environment`). Raises when the
    cluster asks for a token and none is here: refused, Ray's driver would retry every
    second, for ever."""
    address = explicit_ray_address(None)
    if not address or address == "auto":  # Ray turns the token on itself for a cluster it finds
        return {}
    try:
        from ..integrations.ray.discovery import driver_environment
    except ImportError:  # no ray here: the driver says so
        return {}
    return driver_environment(address)
