"""The commands about sessions: ``list`` and ``attach``; and the shell completion of
session ids (``vscode_command`` completes them too)."""

from __future__ import annotations

import json
import sys
from typing import TYPE_CHECKING

import click

from .. import views
from ..client.hub_api import (
    get_json,
    list_sessions,
    not_a_hub,
    request_raw,
    sessions_path,
)
from ..errors import RaydebugError
from .locate import locate_hub, saying_how_to_get_a_hub
from .options import CLIENT_TOKEN_OPTION, HUB_OPTION, RAY_ADDRESS_OPTION
from .output import note

if TYPE_CHECKING:
    from click.shell_completion import CompletionItem

COMPLETION_TIMEOUT = 2.0  # a Tab press must not hang the shell


def complete_session_ids(ctx: click.Context, param: click.Parameter,
                         incomplete: str) -> list[CompletionItem]:
    """Session ids of the hub the command would use, for the shell's Tab. Never starts a
    hub, never raises: no hub means nothing to complete."""
    from click.shell_completion import CompletionItem  # (only a Tab press needs it)

    try:
        location = locate_hub(ctx.params.get("hub"), ctx.params.get("ray_address"),
                              start=False)
        sessions = get_json(location.address, "/api/sessions", timeout=COMPLETION_TIMEOUT,
                            token=ctx.params.get("client_token"))
    except (RaydebugError, OSError):
        return []
    return [CompletionItem(str(s.get("id")),
                           help=views.describe_session(s))
            for s in sessions if isinstance(s, dict)
            and str(s.get("id", "")).startswith(incomplete)]


@click.command("list")
@HUB_OPTION
@RAY_ADDRESS_OPTION
@CLIENT_TOKEN_OPTION
@click.option("--json", "as_json", is_flag=True, help="Print the sessions as JSON.")
@click.option("--wait", "wait_for", default=0, metavar="N",
              help="First wait until at least N sessions exist (see --timeout); exit status "
                   "1 if they did not within it.")
@click.option("--timeout", default=60.0, show_default=True, help="Seconds --wait waits at most.")
def list_command(hub: str | None, ray_address: str | None, client_token: str | None,
                 as_json: bool, wait_for: int, timeout: float) -> None:
    """List paused sessions, oldest first."""
    location = locate_hub(hub, ray_address)
    waited = timeout if wait_for else 0.0
    with saying_how_to_get_a_hub(location):
        if as_json:
            # The hub's answer is the JSON asked for, one session per line: passed on as
            # it came (decoding and encoding 1,000 sessions again took ~25 ms).
            raw = request_raw(location.address, sessions_path(wait_for, waited),
                              timeout=waited + 10.0, token=client_token)
        else:
            sessions = list_sessions(location.address, wait_for, waited, client_token)
    if as_json:
        if not raw.startswith(b"["):
            raise not_a_hub(location.address, "it answered /api/sessions with no list")
        sys.stdout.buffer.write(raw.rstrip() + b"\n")
        sys.stdout.flush()
        sessions = json.loads(raw) if wait_for else []  # only --wait needs them counted
    else:
        from rich.console import Console  # imported here: `list --json` stays quick

        console = Console()
        console.print(views.sessions_table(sessions, width=console.width,
                                           hub=location.address, found_by=location.found_by))
        try:
            health = get_json(location.address, "/api/health", token=client_token)
        except RaydebugError:
            health = {}  # the list itself is what was asked for
        for warning in views.hub_warnings(health):
            console.print(f"[yellow]{warning}[/yellow]", highlight=False)
    if wait_for and len(sessions) < wait_for:
        note(f"timed out after {timeout:g} s waiting for {wait_for} sessions: "
             f"{len(sessions)} exist")
        sys.exit(1)


@click.command()
@click.argument("session", required=False, shell_complete=complete_session_ids)
@HUB_OPTION
@RAY_ADDRESS_OPTION
@CLIENT_TOKEN_OPTION
@click.option("--follow", is_flag=True,
              help="When a session ends, wait for the next breakpoint anywhere and attach.")
@click.option("--timeout", default=None, type=float,
              help="Give up waiting for a breakpoint after this many seconds (default: wait).")
def attach(session: str | None, hub: str | None, ray_address: str | None,
           client_token: str | None, follow: bool, timeout: float | None) -> None:
    """A pdb-like debugger in this terminal for SESSION (default: the oldest waiting one,
    or the next breakpoint)."""
    from ..terminal.attach import AttachCommand

    location = locate_hub(hub, ray_address)
    with saying_how_to_get_a_hub(location):
        status = AttachCommand(location.address, client_token, follow, timeout).run(session)
    sys.exit(status)
