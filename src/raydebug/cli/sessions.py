"""The commands about sessions: ``list``, ``attach`` and ``snapshots`` (the read-only ones
the hub keeps); and the shell completion of session ids (``vscode_command`` completes them
too)."""

from __future__ import annotations

import json
import sys
from typing import TYPE_CHECKING, Any

import click

from ..client.hub_api import (
    clear_snapshots,
    get_json,
    list_sessions,
    list_snapshots,
)
from ..errors import RaydebugError
from .list_json import print_sessions_json
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

    from .. import views

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
            raw = print_sessions_json(location.address, wait_for, waited, client_token)
            sessions = json.loads(raw) if wait_for else []  # only --wait needs them counted
        else:
            sessions = list_sessions(location.address, wait_for, waited, client_token)
    if not as_json:
        from rich.console import Console  # imported here: `list --json` stays quick

        from .. import views

        console = Console()
        console.print(views.sessions_table(sessions, width=console.width,
                                           hub=location.address, found_by=location.found_by))
        _print_snapshots(console, location.address, client_token)
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


def _print_snapshots(console: Any, hub: str, client_token: str | None) -> None:
    """The snapshots' table under the sessions', when the hub keeps any (a hub too old to
    keep them: nothing)."""
    from ..views_snapshots import snapshots_table

    try:
        rows = list_snapshots(hub, token=client_token)
    except RaydebugError:
        return
    if rows:
        console.print(snapshots_table(rows, width=console.width))


@click.command("snapshots")
@click.argument("selector", nargs=-1, metavar="[KEY=VALUE]...")
@HUB_OPTION
@RAY_ADDRESS_OPTION
@CLIENT_TOKEN_OPTION
@click.option("--clear", is_flag=True,
              help="Drop the snapshots of the processes the terms match (all without any).")
@click.option("--json", "as_json", is_flag=True, help="Print the snapshots as JSON.")
def snapshots_command(selector: tuple[str, ...], hub: str | None, ray_address: str | None,
                      client_token: str | None, clear: bool, as_json: bool) -> None:
    """List the snapshots the hub keeps (newest first), of the processes the KEY=VALUE
    terms match (pid=, host=, node=, job=, task=, actor=, rank=, a label): what `raydebug
    run --snapshots` and snapshot points captured, read with `raydebug attach ID`."""
    from ..selectors import parse
    from ..views_snapshots import cleared_line, snapshots_table

    parse(selector)  # a malformed term is said here, before asking the hub
    location = locate_hub(hub, ray_address, start=False)
    with saying_how_to_get_a_hub(location):
        if clear:
            click.echo(cleared_line(clear_snapshots(location.address, selector,
                                                    client_token)))
            return
        rows = list_snapshots(location.address, selector, client_token)
    if as_json:
        click.echo(json.dumps(rows, indent=1))
        return
    from rich.console import Console

    console = Console()
    console.print(snapshots_table(rows, width=console.width))


@click.command()
@click.argument("session", nargs=-1, shell_complete=complete_session_ids,
                metavar="[SESSION | --group SELECTOR...]")
@HUB_OPTION
@RAY_ADDRESS_OPTION
@CLIENT_TOKEN_OPTION
@click.option("--follow", is_flag=True,
              help="When a session ends, wait for the next breakpoint anywhere and attach.")
@click.option("--timeout", default=None, type=float,
              help="Give up waiting for a breakpoint after this many seconds (default: wait).")
@click.option("--group", is_flag=True,
              help="One prompt for every paused process the SELECTOR terms match (none: "
                   "every process), each one's threads threads of the prompt: `threads` "
                   "lists them, `thread N` switches, c continues all, c1 the current thread "
                   "only, n/s/r step it only; processes that pause later join.")
def attach(session: tuple[str, ...], hub: str | None, ray_address: str | None,
           client_token: str | None, follow: bool, timeout: float | None,
           group: bool) -> None:
    """A pdb-like debugger in this terminal for SESSION (default: the oldest waiting one,
    or the next breakpoint; a process id, as `pause` and `ps` print them: its oldest
    waiting session), or with --group for every paused process of a group."""
    if group and follow:
        raise click.UsageError("--follow is for one session at a time; a group session "
                               "takes each process of the group that pauses")
    if group:
        from ..selectors import parse

        parse(session)  # a bad term: one line, before asking the hub
    elif len(session) > 1:
        raise click.UsageError("give one SESSION (or --group SELECTOR...)")
    from ..terminal.attach import AttachCommand
    from ..terminal.group import GroupAttach

    location = locate_hub(hub, ray_address)
    with saying_how_to_get_a_hub(location):
        if group:
            status = GroupAttach(location.address, client_token, False, timeout).run_group(
                session)
        else:
            status = AttachCommand(location.address, client_token, follow, timeout).run(
                session[0] if session else None)
    sys.exit(status)
