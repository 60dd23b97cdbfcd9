"""Options for a hub that raydebug starts on its own (the Ray hub actor, at a job's first
pause): ``RAYDEBUG_HUB_ARGS``, in ``raydebug hub``'s words, travels with the job.

No I/O and no hub imports: a worker reads it before it asks for the hub, so that a mistake
is one line at the pause (and ``raydebug run --hub-args`` says it before the job starts).
"""

from __future__ import annotations

import argparse
import os
import shlex
from collections.abc import Mapping
from typing import Any

from .errors import ConfigurationError

HUB_ARGS_VARIABLE = "RAYDEBUG_HUB_ARGS"


class _HubArgs(argparse.ArgumentParser):
    """The options of ``raydebug hub`` that a hub actor takes (the addresses and ports are
    the actor's to choose); an error is a :class:`ConfigurationError` naming the variable."""

    def __init__(self) -> None:
        super().__init__(prog=HUB_ARGS_VARIABLE, add_help=False, allow_abbrev=False)
        self.add_argument("--allow-terminate", action="store_true", default=None)
        self.add_argument("--max-sessions", type=int)
        self.add_argument("--client-token")
        # --max-worker-connections: the old name, still taken (jobs already carry it)
        self.add_argument("--max-agent-connections", "--max-worker-connections", type=int,
                          dest="max_agent_connections")
        self.add_argument("--max-client-connections", type=int)
        self.add_argument("--handshake-timeout", type=float)
        self.add_argument("--client-idle-timeout", type=float)

    def error(self, message: str) -> Any:  # argparse would print usage and exit
        raise ConfigurationError(
            f"{HUB_ARGS_VARIABLE}: {message} (it takes `raydebug hub` options: "
            "--allow-terminate, --max-sessions N, --client-token T, "
            "--max-agent-connections N, --max-client-connections N, "
            "--handshake-timeout S, --client-idle-timeout S)")


def hub_options_wanted(environ: Mapping[str, str] | None = None) -> dict[str, Any]:
    """``RAYDEBUG_HUB_ARGS`` of ``environ`` (default: this process's; ``raydebug run
    --hub-args`` sets it) as :class:`~raydebug.hub.HubConfig` fields for a hub that this
    process starts (the Ray hub actor):
    ``"--allow-terminate --max-sessions 500"`` -> ``{"allow_terminate": True,
    "max_sessions": 500}``. Raises :class:`ConfigurationError` for what the actor cannot
    take, before anything starts."""
    text = (os.environ if environ is None else environ).get(HUB_ARGS_VARIABLE, "")
    try:
        words = shlex.split(text)
    except ValueError as error:
        raise ConfigurationError(f"{HUB_ARGS_VARIABLE}: {error}: {text!r}") from None
    parsed = _HubArgs().parse_args(words)
    return {name: value for name, value in vars(parsed).items() if value is not None}
