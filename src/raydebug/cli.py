"""The ``raydebug`` command. Each command builds plain data and hands it to :mod:`views`.

A :class:`~raydebug.errors.RaydebugError` becomes one red line on stderr and exit status 1.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import sys
import time
from pathlib import Path
from typing import Any

import click

from . import state_file, views
from .agent.config import parse_address
from .client.hub_api import DEFAULT_HUB, get_json, list_sessions
from .errors import ConfigurationError, HubUnreachableError, RaydebugError

HUB_OPTION = click.option(
    "--hub", "hub", default=None, envvar="RAYDEBUG_CLIENT_ADDRESS",
    help="host:port of the hub's client port (env RAYDEBUG_CLIENT_ADDRESS). Default: the "
         f"hub of the Ray cluster (see --ray-address), else {DEFAULT_HUB}.")
CLIENT_TOKEN_OPTION = click.option(
    "--client-token", envvar="RAYDEBUG_CLIENT_TOKEN", default=None,
    help="The hub's client token, when it was started with one (env RAYDEBUG_CLIENT_TOKEN).")
RAY_ADDRESS_OPTION = click.option(
    "--ray-address", default=None,
    help="Ray cluster whose hub to use: a GCS address or 'auto' (default: RAY_ADDRESS, then "
         "a cluster running on this machine).")


def resolve_client_address(hub: str | None, ray_address: str | None,
                           wait: float = 0.0) -> str:
    """Where the CLI finds the hub: --hub; else a hub started on this machine (its state
    file); else the Ray cluster's published hub (waiting up to ``wait`` seconds for it to
    appear: it starts at the first breakpoint); else the default port. An explicit
    --ray-address that leads nowhere is an error."""
    if hub:
        return hub
    local = state_file.read()  # a hub started on this machine
    if local is not None and not ray_address:
        return str(local["client"])
    try:
        from .integrations import ray as ray_integration
    except ImportError:
        if ray_address:
            raise ConfigurationError(
                "--ray-address needs ray: pip install 'raydebug[ray]'") from None
        return DEFAULT_HUB
    try:
        ray_integration.connect_kv(ray_address)
        info = ray_integration.wait_hub_info(wait)
    except RaydebugError:
        if ray_address:
            raise
        return DEFAULT_HUB
    if info is None:
        if ray_address:
            raise HubUnreachableError(
                "the Ray cluster has no raydebug hub yet: it starts at the first breakpoint, "
                "or run `raydebug hub --ray-address ...`")
        return DEFAULT_HUB
    return info.client


@click.group()
@click.version_option(package_name="raydebug")
def cli() -> None:
    """One port to every paused Python process of a cluster."""


@cli.command()
@click.option("--host", default="127.0.0.1", show_default=True,
              help="Address of the client port (DAP and HTTP). Loopback only.")
@click.option("--port", default=5678, show_default=True, help="Client port (0: any free one).")
@click.option("--worker-host", default="127.0.0.1", show_default=True,
              help="Address workers dial; use the node's cluster address for other nodes.")
@click.option("--worker-port", default=5679, show_default=True, help="Worker port (0: any).")
@click.option("--token", envvar="RAYDEBUG_TOKEN", default=None,
              help="Worker token (env RAYDEBUG_TOKEN); generated when not given.")
@click.option("--allow-terminate", is_flag=True,
              help="Let clients kill debuggees with terminate / terminateDebuggee.")
@click.option("--max-sessions", default=10_000, show_default=True)
@click.option("--client-token", envvar="RAYDEBUG_CLIENT_TOKEN", default=None,
              help="Require this token of every DAP and HTTP client; needed to listen beyond "
                   "loopback (env RAYDEBUG_CLIENT_TOKEN).")
@click.option("--unix-socket", default=None, type=click.Path(dir_okay=False),
              help="Also serve clients on this Unix socket (mode 0600); raydebug tunnel "
                   "forwards to it when present.")
@click.option("--log-level", default="info", show_default=True,
              type=click.Choice(["debug", "info", "warning", "error"]))
@click.option("--ray-address", default=None,
              help="Serve this Ray cluster ('auto': the local one): publish the hub where "
                   "workers find it; workers dial this node's address unless --worker-host.")
@click.option("--tls", is_flag=True, envvar="RAYDEBUG_HUB_TLS",
              help="Serve workers over TLS with a self-signed certificate, created on first "
                   "use in ~/.local/state/raydebug/; workers pin its fingerprint (published "
                   "with the address, or RAYDEBUG_HUB_CERT). Env RAYDEBUG_HUB_TLS=1.")
@click.option("--max-worker-connections", default=1_000, show_default=True,
              help="Concurrent worker connections per peer address.")
@click.option("--max-client-connections", default=64, show_default=True,
              help="Concurrent client connections per peer address (a cluster session's "
                   "attached child sessions do not count).")
@click.option("--handshake-timeout", default=10.0, show_default=True,
              help="Seconds a worker connection has to finish TLS and the token handshake.")
@click.option("--client-idle-timeout", default=30.0, show_default=True,
              help="Seconds a client connection has to send its first bytes.")
def hub(host: str, port: int, worker_host: str, worker_port: int, token: str | None,
        allow_terminate: bool, max_sessions: int, client_token: str | None,
        unix_socket: str | None, log_level: str, ray_address: str | None, tls: bool,
        max_worker_connections: int, max_client_connections: int, handshake_timeout: float,
        client_idle_timeout: float) -> None:
    """Run the hub: list sessions and route debuggers to them."""
    from .hub import Hub, HubConfig

    logging.basicConfig(level=log_level.upper(), stream=sys.stderr,
                        format="raydebug hub: %(message)s")
    ray_integration: Any = None
    if ray_address:
        from .integrations import ray as ray_module

        ray_integration = ray_module
        ray_module.connect_kv(ray_address)
        if worker_host == "127.0.0.1":
            worker_host = ray_module.local_node_ip()
    config = HubConfig(host=host, port=port, worker_host=worker_host, worker_port=worker_port,
                       allow_terminate=allow_terminate, max_sessions=max_sessions,
                       client_token=client_token or None,
                       unix_socket=os.path.abspath(unix_socket) if unix_socket else None,
                       tls=tls, max_worker_connections=max_worker_connections,
                       max_client_connections=max_client_connections,
                       handshake_timeout=handshake_timeout,
                       client_idle_timeout=client_idle_timeout)
    if token:
        config.token = token
    import asyncio

    asyncio.run(_serve_hub(Hub(config), ray_integration))


async def _serve_hub(hub: Any, ray_integration: Any = None) -> None:
    try:
        await hub.start()
    except OSError as error:
        raise ConfigurationError(f"cannot listen: {error.strerror or error}") from None
    client = "{}:{}".format(*hub.client_address)
    worker = "{}:{}".format(*hub.worker_address)
    cert = hub.certificate.fingerprint if hub.certificate else None
    published = None
    if ray_integration is not None:
        published = ray_integration.publish_cli_hub(client, worker, hub.config.token, cert)
    recorded = state_file.write(client, worker, hub.config.token, hub.config.unix_socket, cert)
    click.echo(views.hub_banner(client, worker, hub.config.token, cert), nl=False)
    sys.stdout.flush()
    import asyncio

    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, stop.set)
    serving = asyncio.ensure_future(hub.serve_forever())
    try:
        await stop.wait()
    finally:
        serving.cancel()
        if published is not None:
            ray_integration.unpublish_hub_info(published)
        state_file.remove(recorded)
        await hub.close()


@cli.command(context_settings={"ignore_unknown_options": True, "allow_interspersed_args": False})
@click.argument("command", nargs=-1, required=True, type=click.UNPROCESSED)
def run(command: tuple[str, ...]) -> None:
    """Run a Ray driver with raydebug on: `raydebug run -- python job.py`.

    No code change: every worker's breakpoint() and post-mortem go to the cluster's hub
    (started on the head node at the first pause). The driver's own breakpoint() opens pdb
    when its stdin is a terminal, else (or with RAYDEBUG_DRIVER=remote) a session.
    """
    import os
    import shutil

    env = dict(os.environ)
    env["RAY_RUNTIME_ENV_HOOK"] = "raydebug.integrations.ray.runtime_env_hook"
    env["RAYDEBUG_RAY_DRIVER"] = "1"
    program = shutil.which(command[0])
    if program is None:
        raise ConfigurationError(f"command not found: {command[0]}")
    os.execve(program, list(command), env)


@cli.command("list")
@HUB_OPTION
@RAY_ADDRESS_OPTION
@CLIENT_TOKEN_OPTION
@click.option("--json", "as_json", is_flag=True, help="Print the sessions as JSON.")
@click.option("--wait", "wait_for", default=0, metavar="N",
              help="First wait until at least N sessions exist (see --timeout).")
@click.option("--timeout", default=60.0, show_default=True, help="Seconds --wait waits at most.")
def list_command(hub: str | None, ray_address: str | None, client_token: str | None,
                 as_json: bool, wait_for: int, timeout: float) -> None:
    """List paused sessions, oldest first."""
    started = time.monotonic()
    address = resolve_client_address(hub, ray_address, timeout if wait_for else 0.0)
    remaining = max(0.0, timeout - (time.monotonic() - started))
    sessions = list_sessions(address, wait_for, remaining, client_token)
    if as_json:
        click.echo(json.dumps(sessions, indent=2))
    else:
        from rich.console import Console  # imported here: `list --json` stays quick

        console = Console()
        console.print(views.sessions_table(sessions))
        try:
            warnings = views.hub_warnings(get_json(address, "/api/health", token=client_token))
        except RaydebugError:
            warnings = []  # the list itself is what was asked for
        for warning in warnings:
            console.print(f"[yellow]{warning}[/yellow]", highlight=False)


@cli.command()
@HUB_OPTION
@RAY_ADDRESS_OPTION
@CLIENT_TOKEN_OPTION
@click.option("--session", default=None, help="Attach to this session instead of the oldest.")
@click.option("--write", "write", is_flag=True, help="Add it to .vscode/launch.json.")
@click.option("--local-root", default=None, type=click.Path(file_okay=False),
              help="Your local checkout of code Ray shipped with working_dir: adds "
                   "pathMappings from the sessions' remote roots.")
@click.option("--workspace", default=".", type=click.Path(file_okay=False, path_type=Path),
              show_default=True, help="Folder whose .vscode/launch.json --write edits.")
def vscode(hub: str | None, ray_address: str | None, client_token: str | None,
           session: str | None, write: bool, local_root: str | None, workspace: Path) -> None:
    """Print (or --write) VS Code's stock debugpy attach config for the hub."""
    address = resolve_client_address(hub, ray_address)
    host, port = parse_address(address, "--hub")
    mappings = None
    if local_root is not None:
        sessions = list_sessions(address, token=client_token)
        if session:
            sessions = [s for s in sessions if s.get("id") == session]
        mappings = views.path_mappings(sessions, str(Path(local_root).resolve()))
    config = views.vscode_config(host, port, session, path_mappings=mappings,
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


@cli.command()
@click.argument("session", required=False)
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
    from .terminal.attach import AttachCommand

    address = resolve_client_address(hub, ray_address)
    sys.exit(AttachCommand(address, client_token, follow, timeout).run(session))


@cli.command("hub-address")
@RAY_ADDRESS_OPTION
@click.option("--json", "as_json", is_flag=True, help="Print {\"client\": \"host:port\"}.")
def hub_address(ray_address: str | None, as_json: bool) -> None:
    """Where this machine's hub (or its Ray cluster's) serves clients (for raydebug tunnel)."""
    local = state_file.read()
    answer: dict[str, str] = {}
    if local is not None and not ray_address:
        answer["client"] = str(local["client"])
        if local.get("unix"):
            answer["unix"] = str(local["unix"])
    else:
        answer["client"] = resolve_client_address(None, ray_address or "auto")
    click.echo(json.dumps(answer) if as_json else answer.get("unix") or answer["client"])


@cli.command()
@click.argument("destination")
@click.option("--ssh-option", "ssh_options", multiple=True, metavar="KEY=VALUE",
              help="Passed to ssh as -o KEY=VALUE (repeatable).")
@click.option("--local-port", default=5678, show_default=True)
@click.option("--remote-raydebug", default="raydebug", show_default=True,
              help="The raydebug command on the remote machine.")
def tunnel(destination: str, ssh_options: tuple[str, ...], local_port: int,
           remote_raydebug: str) -> None:
    """One SSH tunnel to the hub on DESTINATION ([user@]host), kept up until Ctrl-C."""
    from .tunnel import Tunnel, main_loop

    def say(text: str) -> None:
        click.echo(f"raydebug tunnel: {text}", err=True)

    def ready(port: int) -> None:
        config = views.vscode_config("127.0.0.1", port)
        click.echo(f"raydebug tunnel ready: 127.0.0.1:{port} -> hub on {destination}")
        click.echo(f"  raydebug list --hub 127.0.0.1:{port}")
        click.echo(f"  raydebug attach --hub 127.0.0.1:{port}")
        click.echo("  VS Code launch.json configuration:")
        click.echo("    " + json.dumps(config, indent=4).replace("\n", "\n    "))
        sys.stdout.flush()

    signal.signal(signal.SIGTERM, _interrupt)  # stop like Ctrl-C: ssh is stopped too
    sys.exit(main_loop(Tunnel(destination, ssh_options, local_port, remote_raydebug),
                       say, ready))


def _interrupt(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt


def main() -> None:
    try:
        cli(standalone_mode=False)
    except click.exceptions.Abort:
        sys.exit(130)
    except click.ClickException as error:
        error.show()
        sys.exit(error.exit_code)
    except RaydebugError as error:
        from rich.console import Console

        Console(stderr=True).print(f"[red]raydebug: {error}[/red]", highlight=False)
        sys.exit(1)
    except KeyboardInterrupt:
        sys.exit(130)
