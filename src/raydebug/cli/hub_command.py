"""``raydebug hub``: run the hub in this process until SIGINT or SIGTERM."""

from __future__ import annotations

import errno
import logging
import os
import re
import signal
import sys
from typing import Any

import click
from click.core import ParameterSource

from .. import state_file, views
from ..errors import ConfigurationError
from ..shell_command import raydebug_command


@click.command()
@click.option("--host", default="127.0.0.1", show_default=True,
              help="Address of the client port (DAP and HTTP): a loopback address, or "
                   "any with --client-token (every client can run code in the processes).")
@click.option("--port", default=5678, show_default=True, help="Client port (0: any free one).")
@click.option("--agent-host", default="127.0.0.1", show_default=True,
              help="Address the processes' agents dial; use the node's cluster address for "
                   "other nodes.")
@click.option("--agent-port", default=5679, show_default=True,
              help="Port the agents dial (0: any).")
@click.option("--worker-host", default=None, hidden=True, help="The old --agent-host.")
@click.option("--worker-port", default=None, type=int, hidden=True,
              help="The old --agent-port.")
@click.option("--token", envvar="RAYDEBUG_TOKEN", default=None,
              help="The agents' token (env RAYDEBUG_TOKEN). Default: the token of the last "
                   "hub on the same agent address (its paused processes link again), else a "
                   "new one.")
@click.option("--allow-terminate", is_flag=True,
              help="Let clients kill debuggees with terminate / terminateDebuggee.")
@click.option("--max-sessions", default=10_000, show_default=True,
              help="Paused sessions the hub lists at once; a process beyond it is told the "
                   "session is refused.")
@click.option("--client-token", envvar="RAYDEBUG_CLIENT_TOKEN", default=None,
              help="Require this token of every DAP and HTTP client (env "
                   "RAYDEBUG_CLIENT_TOKEN). Needed for a --host that is not loopback; "
                   "without it, only this user's (and root's) loopback clients are served.")
@click.option("--unix-socket", default=None, type=click.Path(dir_okay=False),
              help="Also serve clients on this Unix socket (mode 0600); raydebug tunnel "
                   "forwards to it when present.")
@click.option("--log-level", default="info", show_default=True,
              type=click.Choice(["debug", "info", "warning", "error"]))
@click.option("--ray-address", default=None,
              help="Serve this Ray cluster ('auto': the local one): publish the hub where "
                   "processes find it; they dial this node's address unless --agent-host.")
@click.option("--tls", is_flag=True, envvar="RAYDEBUG_HUB_TLS",
              help="Serve agents over TLS with a self-signed certificate, created on first "
                   "use in ~/.local/state/raydebug/; agents pin its fingerprint (published "
                   "with the address, or RAYDEBUG_HUB_CERT). Env RAYDEBUG_HUB_TLS=1.")
@click.option("--max-agent-connections", default=1_000, show_default=True,
              help="Concurrent agent connections per peer address.")
@click.option("--max-worker-connections", default=None, type=int, hidden=True,
              help="The old --max-agent-connections.")
@click.option("--max-client-connections", default=64, show_default=True,
              help="Concurrent client connections per peer address (a cluster session's "
                   "attached child sessions do not count).")
@click.option("--handshake-timeout", default=10.0, show_default=True,
              help="Seconds an agent's connection has to finish TLS and the token handshake.")
@click.option("--client-idle-timeout", default=30.0, show_default=True,
              help="Seconds a client connection has to send its first bytes.")
@click.option("--max-snapshots", default=1_000, show_default=True,
              type=click.IntRange(min=1),
              help="Snapshots kept (raydebug run --snapshots); the oldest are dropped.")
@click.option("--snapshot-dir", default=None, type=click.Path(file_okay=False),
              help="Also keep snapshots here as JSON files (mode 0600), read back when a "
                   "hub starts with the same directory.")
@click.option("--busy-poll", envvar="RAYDEBUG_HUB_BUSY_POLL", default="auto",
              show_default=True, type=click.Choice(["auto", "on", "off"]),
              help="Wait for a process's answer without sleeping, up to 2 ms (a request "
                   "through the hub ~0.1 ms faster); auto: while the node has CPU to spare. "
                   "Env RAYDEBUG_HUB_BUSY_POLL.")
def hub(host: str, port: int, agent_host: str, agent_port: int, worker_host: str | None,
        worker_port: int | None, token: str | None,
        allow_terminate: bool, max_sessions: int, client_token: str | None,
        unix_socket: str | None, log_level: str, ray_address: str | None, tls: bool,
        max_agent_connections: int, max_worker_connections: int | None,
        max_client_connections: int, handshake_timeout: float,
        client_idle_timeout: float, max_snapshots: int, snapshot_dir: str | None,
        busy_poll: str) -> None:
    """Run the hub: list sessions and route debuggers to them."""
    from ..hub import Hub, HubConfig  # here: the other commands (`raydebug list`) need none
    from ..hub.busy_poll import BusyPollSelector, run_polling

    agent_host, agent_port = _by_either_name("agent_host"), _by_either_name("agent_port")
    max_agent_connections = _by_either_name("max_agent_connections")

    logging.basicConfig(level=log_level.upper(), stream=sys.stderr,
                        format="raydebug hub: %(message)s")
    ray_integration: Any = None
    if ray_address:
        from ..integrations import ray as ray_module

        ray_integration = ray_module
        ray_module.connect_kv(ray_address)
        if agent_host == "127.0.0.1":
            agent_host = ray_module.local_node_ip()
    config = HubConfig(host=host, port=port, agent_host=agent_host, agent_port=agent_port,
                       allow_terminate=allow_terminate, max_sessions=max_sessions,
                       client_token=client_token or None,
                       unix_socket=os.path.abspath(unix_socket) if unix_socket else None,
                       tls=tls, max_agent_connections=max_agent_connections,
                       max_client_connections=max_client_connections,
                       handshake_timeout=handshake_timeout,
                       client_idle_timeout=client_idle_timeout,
                       max_snapshots=max_snapshots,
                       snapshot_dir=os.path.abspath(snapshot_dir) if snapshot_dir else None)
    token_kept = False
    if token:
        config.token = token
    elif agent_port and (saved := state_file.saved_token(f"{agent_host}:{agent_port}")):
        config.token = saved  # the processes linked to the last hub here hold this token
        token_kept = True
    selector = BusyPollSelector(spare_cpu={"on": lambda: True, "off": lambda: False}.get(
        busy_poll))
    hub = Hub(config, answer_due=selector.answer_due, statistics=selector.statistics)
    run_polling(selector, _serve_hub(hub, ray_integration, token_kept))


OLD_NAMES = {"agent_host": "worker_host", "agent_port": "worker_port",  # hidden, still taken
             "max_agent_connections": "max_worker_connections"}


def _by_either_name(name: str) -> Any:
    """The value of the option ``name`` of the command being run, or of its old name
    (:data:`OLD_NAMES`) when that was given instead. Raises :class:`click.UsageError` when
    both were."""
    context = click.get_current_context()
    old = OLD_NAMES[name]
    if context.params[old] is None:
        return context.params[name]
    if context.get_parameter_source(name) is not ParameterSource.DEFAULT:
        raise click.UsageError(f"--{old.replace('_', '-')} is the old name of "
                               f"--{name.replace('_', '-')}: give one of them")
    return context.params[old]


def cannot_listen(error: OSError) -> str:
    """What ``raydebug hub`` says when it cannot listen (asyncio's bind error), and, when the
    port is taken, what to do."""
    text = error.strerror or str(error)
    bound = re.search(r"\('([^']*)', (\d+)\)", text)
    if error.errno != errno.EADDRINUSE or bound is None:
        return f"cannot listen: {text}"
    return (f"cannot listen on {bound.group(1)}:{bound.group(2)}: the address is in use "
            f"(another hub? `{raydebug_command()} list` names the hub it finds); --port and "
            "--agent-port pick other ports (0: any free one)")


async def _serve_hub(hub: Any, ray_integration: Any = None, token_kept: bool = False) -> None:
    import asyncio

    try:
        await hub.start()
    except OSError as error:
        raise ConfigurationError(cannot_listen(error)) from None
    if token_kept:  # said once it serves: a hub that cannot listen serves nobody
        logging.getLogger("raydebug.hub").info(
            "serving with the token of the last hub on %s:%s (its processes link again)",
            *hub.agent_address)
    client = "{}:{}".format(*hub.client_address)
    agents = "{}:{}".format(*hub.agent_address)
    cert = hub.certificate.fingerprint if hub.certificate else None
    published = None
    if ray_integration is not None:
        published = ray_integration.publish_cli_hub(client, agents, hub.config.token, cert)
        ray_integration.publish_breakpoints_of(hub)
    recorded = state_file.write(client, agents, hub.config.token, hub.config.unix_socket, cert)
    try:
        state_file.save_token(agents, hub.config.token)  # for the next hub on this address
    except OSError as error:
        logging.getLogger("raydebug.hub").warning(
            "could not keep the token for the next hub on %s: %s", agents, error)
    click.echo(views.hub_banner(client, agents, hub.config.token, cert), nl=False)
    sys.stdout.flush()
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
