"""Run at interpreter start (from raydebug-startup.pth) when a raydebug variable asks for it.

Only installs hooks; debugpy and the hub link wait for the first pause, and ray is not
imported here.
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
