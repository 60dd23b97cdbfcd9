"""Options that several commands share, spelled once."""

from __future__ import annotations

import click

from ..client.hub_api import DEFAULT_HUB

HUB_OPTION = click.option(
    "--hub", "hub", default=None, envvar="RAYDEBUG_CLIENT_ADDRESS", metavar="HOST:PORT",
    help="The hub's client port (env RAYDEBUG_CLIENT_ADDRESS). Default: the hub of the Ray "
         "cluster named by --ray-address or RAY_ADDRESS, else the hub started on this "
         f"machine, else that of a Ray cluster running here (started if it has none), else "
         f"{DEFAULT_HUB}.")
CLIENT_TOKEN_OPTION = click.option(
    "--client-token", envvar="RAYDEBUG_CLIENT_TOKEN", default=None,
    help="The hub's client token, when it was started with one (env RAYDEBUG_CLIENT_TOKEN).")
RAY_ADDRESS_OPTION = click.option(
    "--ray-address", default=None, metavar="ADDRESS",
    help="The Ray cluster whose hub to use (its hub actor is started if it has none yet): a "
         "GCS address HOST:PORT or 'auto'. Default: RAY_ADDRESS. Wins over a hub started "
         "on this machine.")
