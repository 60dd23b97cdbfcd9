"""The commands about sessions: ``list``, ``attach`` and ``vscode``; and the shell
completion of session ids."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click
from click.shell_completion import CompletionItem

from .. import views
from ..agent.config import parse_address
from ..client.hub_api import (
    get_json,
    list_sessions,
    not_a_hub,
    request_raw,
    sessions_path,
)
from ..errors import ConfigurationError, HubUnreachableError, RaydebugError
from .locate import locate_hub
from .options import CLIENT_TOKEN_OPTION, HUB_OPTION, RAY_ADDRESS_OPTION
from .output import note

COMPLETION_TIMEOUT = 2.0  # a Tab press must not hang the shell


def complete_session_ids(ctx: click.Context, param: click.Parameter,
                         incomplete: str) -> list[CompletionItem]:
    """Session ids of the hub the command would use, for the shell's Tab. Never starts a
    hub, never raises: no hub means nothing to complete."""
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
    try:
        if as_json:
            # The hub's answer is the JSON asked for, one session per line: passed on as
            # it came (decoding and encoding 1,000 sessions again took ~25 ms).
            raw = request_raw(location.address, sessions_path(wait_for, waited),
                              timeout=waited + 10.0, token=client_token)
        else:
            sessions = list_sessions(location.address, wait_for, waited, client_token)
    except HubUnreachableError as error:
        if not location.is_default:
            raise
        raise HubUnreachableError(
            f"{error}; no hub or Ray cluster was found on this machine: start one with "
            "`raydebug hub`, or pass --hub HOST:PORT or --ray-address",
            address=error.address) from None
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
@HUB_OPTION
@RAY_ADDRESS_OPTION
@CLIENT_TOKEN_OPTION
@click.option("--session", default=None, shell_complete=complete_session_ids,
              help="Attach to this one session only. Default: every paused process of the "
                   "cluster, now and later, each as its own child debug session.")
@click.option("--write", "write", is_flag=True, help="Add it to .vscode/launch.json.")
@click.option("--local-root", default=None,
              type=click.Path(exists=True, file_okay=False, resolve_path=True),
              help="Your local checkout of the code Ray shipped with working_dir: the hub "
                   "maps the workers' paths to it and back, whatever the job's "
                   "_ray_pkg_<hash> directory is called.")
@click.option("--workspace", default=".", type=click.Path(file_okay=False, path_type=Path),
              show_default=True, help="Folder whose .vscode/launch.json --write edits.")
def vscode(hub: str | None, ray_address: str | None, client_token: str | None,
           session: str | None, write: bool, local_root: str | None, workspace: Path) -> None:
    """Print (or --write) VS Code's stock debugpy attach config for the hub."""
    location = locate_hub(hub, ray_address)
    host, port = parse_address(location.address, "--hub")
    try:
        get_json(location.address, "/api/health", timeout=3.0, token=client_token)
    except RaydebugError as error:
        note(f"{error}. The configuration below is for {location.describe()}; it works "
             "once a hub serves there.")
    else:
        if session is not None:
            session = _known_session(location.address, session, client_token)
    config = views.vscode_config(host, port, session, local_root=local_root,
                                 client_token=client_token)
    if not write:
        click.echo(json.dumps(config, indent=4))
        return
    path = workspace / ".vscode" / "launch.json"
    existing = path.read_text() if path.exists() else None
    try:
        text = views.merge_launch_json(existing, config)
    except ValueError as error:
        by_hand = json.dumps(config, indent=4)
        raise ConfigurationError(f"cannot update {path}: {error}; fix it or add this "
                                 f"configuration by hand:\n{by_hand}") from None
    path.parent.mkdir(parents=True, exist_ok=True)
    if existing is not None and views.has_comments(existing):
        path.with_name("launch.json.bak").write_text(existing)
        click.echo(f"kept the original (with its comments) as {path}.bak")
    path.write_text(text)
    click.echo(f"wrote {config['name']!r} to {path}")


def _known_session(hub: str, wanted: str, token: str | None) -> str:
    """``wanted``, or the one id it is a unique prefix of; says so on stderr when the hub
    lists no such session (the configuration still names it: it may pause later)."""
    ids = [str(s.get("id")) for s in list_sessions(hub, token=token) if isinstance(s, dict)]
    matches = [found for found in ids if found.startswith(wanted)]
    if wanted in ids:
        return wanted
    if len(matches) == 1:
        return matches[0]
    listed = ", ".join(ids[:10]) or "none"
    note(f"the hub lists no session {wanted!r} now (sessions: {listed})")
    return wanted


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
    sys.exit(AttachCommand(location.address, client_token, follow, timeout).run(session))
