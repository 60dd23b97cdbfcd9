"""``raydebug vscode``: VS Code's stock debugpy attach configuration for the hub."""

from __future__ import annotations

import json
from pathlib import Path

import click

from .. import views
from ..agent.config import parse_address
from ..client.hub_api import get_json, list_sessions
from ..errors import ConfigurationError, RaydebugError
from .locate import locate_hub
from .options import CLIENT_TOKEN_OPTION, HUB_OPTION, RAY_ADDRESS_OPTION
from .output import note
from .sessions import complete_session_ids


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
