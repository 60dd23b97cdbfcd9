"""Run at interpreter start (from raydebug-startup.pth) when RAYDEBUG_POST_MORTEM is set.

Only installs hooks; debugpy and the hub link wait for the first pause.
"""

from __future__ import annotations


def install() -> None:
    from . import install_excepthook

    install_excepthook()
