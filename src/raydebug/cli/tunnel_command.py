"""``raydebug tunnel`` (on the laptop) and ``raydebug hub-address`` (which it runs on the
remote machine)."""

from __future__ import annotations

import json
import signal
import sys
from typing import Any

import click

from .. import views
from ..errors import HubUnreachableError
from .locate import locate_hub
from .options import RAY_ADDRESS_OPTION
from .output import note
from .web_command import remove_tunnel, write_tunnel


@click.command("hub-address")
@RAY_ADDRESS_OPTION
@click.option("--json", "as_json", is_flag=True, help="Print {\"client\": \"host:port\"}.")
def hub_address(ray_address: str | None, as_json: bool) -> None:
    """Where this machine's hub (or its Ray cluster's) serves clients (for raydebug tunnel)."""
    location = locate_hub(None, ray_address)
    if location.is_default:
        raise HubUnreachableError(f"no hub here: {location.found_by}; start one with "
                                  "`raydebug hub`, or pass --ray-address")
    answer = {"client": location.address}
    if location.unix:
        answer["unix"] = location.unix
    click.echo(json.dumps(answer) if as_json else location.unix or location.address)


@click.command()
@click.argument("destination")
@click.option("--ssh-option", "ssh_options", multiple=True, metavar="KEY=VALUE",
              help="Passed to ssh as -o KEY=VALUE (repeatable).")
@click.option("--local-port", default=5678, show_default=True,
              help="The port on this machine (127.0.0.1) that reaches the remote hub.")
@click.option("--remote-raydebug", default="raydebug", show_default=True,
              help="The raydebug command on the remote machine.")
def tunnel(destination: str, ssh_options: tuple[str, ...], local_port: int,
           remote_raydebug: str) -> None:
    """One SSH tunnel to the hub on DESTINATION ([user@]host), kept up until Ctrl-C."""
    from ..tunnel import Tunnel, main_loop

    def say(text: str) -> None:
        note(f"tunnel: {text}")

    records: list[dict[str, Any]] = []

    def ready(port: int) -> None:
        click.echo(views.tunnel_banner(port, destination), nl=False)
        sys.stdout.flush()
        records.append(write_tunnel(port, destination))  # for `raydebug web`

    signal.signal(signal.SIGTERM, _interrupt)  # stop like Ctrl-C: ssh is stopped too
    try:
        code = main_loop(Tunnel(destination, ssh_options, local_port, remote_raydebug),
                         say, ready)
    finally:
        for record in records:
            remove_tunnel(record)
    sys.exit(code)


def _interrupt(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt
