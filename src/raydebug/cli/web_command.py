"""``raydebug web``: the address of the hub's web page (and, with ``--open``, a browser on it).

Which hub: ``--hub`` or ``--ray-address`` when given; else a ``raydebug tunnel`` running on
this machine (its local port reaches the remote hub: see :func:`read_tunnel`); else the hub
the other commands would use (:mod:`.locate`). When the hub wants its client token, the
address carries it (``?token=``: the page keeps it in a cookie and drops it from the address
bar); without a token to give, the page asks for it.
"""

from __future__ import annotations

import json
import os
import webbrowser
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

import click

from .. import state_file
from ..client.hub_api import get_json
from ..errors import ClientTokenError, HubUnreachableError
from .locate import HubLocation, locate_hub
from .options import CLIENT_TOKEN_OPTION, HUB_OPTION, RAY_ADDRESS_OPTION

_WILDCARDS = ("0.0.0.0", "::", "")


@dataclass(frozen=True)
class PageAddress:
    url: str  # what to open (with the token when there is one to give)
    found_by: str
    asks_token: bool  # the hub wants a token that the address does not carry


def page_url(client: str, token: str | None = None) -> str:
    """``http://host:port/`` of the hub whose client address is ``client``; a hub listening
    on every address is opened on loopback."""
    host, _, port = client.rpartition(":")
    if host.strip("[]") in _WILDCARDS:
        host = "127.0.0.1"
    suffix = f"?token={quote(token, safe='')}" if token else ""
    return f"http://{host}:{port}/{suffix}"


def format_page_address(page: PageAddress) -> str:
    """What ``raydebug web`` prints: the address first (tools read the first line)."""
    lines = [page.url, f"  the hub: {page.found_by}"]
    if page.asks_token:
        lines.append("  the page will ask for the hub's client token (or pass --client-token)")
    return "\n".join(lines)


def tunnel_path() -> Any:
    return state_file.directory() / "tunnel.json"


def write_tunnel(port: int, destination: str) -> dict[str, Any]:
    """Record a running ``raydebug tunnel`` (this process) so ``raydebug web`` uses it."""
    record = {"port": port, "destination": destination, "pid": os.getpid()}
    state_file.write_private(tunnel_path(), json.dumps(record).encode())
    return record


def remove_tunnel(record: dict[str, Any]) -> None:
    try:
        if json.loads(tunnel_path().read_text()) == record:
            tunnel_path().unlink()
    except (OSError, ValueError):
        pass


def read_tunnel() -> HubLocation | None:
    """The local end of a live ``raydebug tunnel`` of this user, or None."""
    try:
        record = json.loads(tunnel_path().read_text())
        port, pid, destination = int(record["port"]), int(record["pid"]), str(
            record["destination"])
        os.kill(pid, 0)
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return HubLocation(f"127.0.0.1:{port}", f"raydebug tunnel to {destination}, pid {pid}")


def find_page(hub: str | None, ray_address: str | None, token: str | None) -> PageAddress:
    """The page's address (see the module docstring). Raises HubUnreachableError when no
    hub answers there."""
    location = None if hub or ray_address else read_tunnel()
    if location is None:
        location = locate_hub(hub, ray_address)
    try:
        get_json(location.address, "/api/health", timeout=10.0, token=token)
        needs_token = token is not None
    except ClientTokenError:
        needs_token = True
    except HubUnreachableError as error:
        raise HubUnreachableError(f"{error} ({location.found_by})",
                                  address=error.address) from None
    given = token if needs_token else None
    return PageAddress(page_url(location.address, given), location.describe(),
                       asks_token=needs_token and token is None)


@click.command()
@HUB_OPTION
@RAY_ADDRESS_OPTION
@CLIENT_TOKEN_OPTION
@click.option("--open", "open_browser", is_flag=True, help="Also open it in a browser.")
def web(hub: str | None, ray_address: str | None, client_token: str | None,
        open_browser: bool) -> None:
    """Print the address of the hub's web page (sessions, processes, a debugger)."""
    page = find_page(hub, ray_address, client_token)
    click.echo(format_page_address(page))
    if open_browser:
        webbrowser.open(page.url)
