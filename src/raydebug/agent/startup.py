"""Run at interpreter start (from raydebug-startup.pth) when a raydebug variable asks for it.

Installs hooks and, with ``RAYDEBUG_LIVE=1``, starts the live link in the background (see
:mod:`raydebug.agent.live`); debugpy waits for the first pause, and ray is not imported here.
"""

from __future__ import annotations

import os
import sys

TRUTHY = ("1", "true", "yes", "on")


def install() -> None:
    from . import driver_breakpoint, install_excepthook

    if os.environ.get("RAYDEBUG_POST_MORTEM", "").lower() in TRUTHY:
        install_excepthook()
    if os.environ.get("RAYDEBUG_RAY_DRIVER", "").lower() in TRUTHY:
        sys.breakpointhook = driver_breakpoint  # `raydebug run`: Ray only sets the env var
    from . import live, start_live_link

    if live.enabled():  # a Ray worker has RAYDEBUG_LIVE=ray: its setup hook links it
        start_live_link()
