"""Run at interpreter start (from raydebug-startup.pth) when a raydebug variable asks for it.

Installs hooks and, with ``RAYDEBUG_LIVE=1``, starts the live link in the background (see
:mod:`raydebug.agent.link.live`); debugpy waits for the first pause, and ray is not imported here.
"""

from __future__ import annotations

import os
import sys

from .flags import is_on


def install() -> None:
    if is_raydebug_command():
        return  # `raydebug ps` with RAYDEBUG_LIVE=1 exported would list itself
    from . import driver_breakpoint, install_excepthook

    if is_on(os.environ.get("RAYDEBUG_POST_MORTEM")):
        install_excepthook()
    if is_on(os.environ.get("RAYDEBUG_SNAPSHOTS")):
        from . import install_snapshot_hooks

        install_snapshot_hooks()  # after post-mortem's: a snapshot first, then the freeze
    if is_on(os.environ.get("RAYDEBUG_RAY_DRIVER")):
        sys.breakpointhook = driver_breakpoint  # `raydebug run`: Ray only sets the env var
    from . import start_live_link
    from .link import live

    if live.enabled():  # a Ray worker has RAYDEBUG_LIVE=ray: its setup hook links it
        start_live_link()


def is_raydebug_command(orig_argv: list[str] | None = None) -> bool:
    """Whether this interpreter runs raydebug's own command line (``raydebug ...`` or
    ``python -m raydebug ...``): a hub or a client, never a process to debug or list, even
    when the shell it was started from exports ``RAYDEBUG_LIVE=1``."""
    argv = sys.orig_argv if orig_argv is None else orig_argv  # sys.argv: "-m" in a .pth
    args = iter(argv[1:])
    for arg in args:
        if arg in ("-X", "-W"):
            next(args, None)  # the option's value
        elif arg == "-m":
            return next(args, None) == "raydebug"
        elif arg == "-c" or not arg.startswith("-"):
            return os.path.basename(arg) == "raydebug"
    return False
