"""``raydebug link``: make running processes started without raydebug live processes.

Local (``pid=N`` terms): the hub is found as for every command; each process is linked
from here (:mod:`raydebug.linking`), then the hub asked until it lists them. On a Ray
cluster (``--ray-address`` or ``RAY_ADDRESS``, with ``job=``, ``node=``, ``actor=``,
``pid=`` terms or none; with no pid-only terms, the cluster running on this machine):
:mod:`raydebug.integrations.ray.link_jobs` picks the workers and links them from a task on
each of their nodes. One line per process; exit status 1 when
one could not be linked.
"""

from __future__ import annotations

import socket
import sys
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

import click

from ..errors import ConfigurationError
from .help_format import FittedExamplesCommand
from .locate import HubLocation, explicit_ray_address, locate_hub, saying_how_to_get_a_hub
from .options import CLIENT_TOKEN_OPTION, HUB_OPTION, RAY_ADDRESS_OPTION
from .output import error, note

RAY_KEYS = ("job", "node", "actor", "pid")


@click.command(cls=FittedExamplesCommand, epilog="\b\nExamples:\n"
               "  raydebug link pid=4242                  a process of this machine\n"
               "  raydebug link pid=4242 pid=4243         several\n"
               "  raydebug link --ray-address HEAD:6379 job=02000000\n"
               "                                          every worker of a Ray job, on "
               "every node\n"
               "  raydebug link --ray-address auto        every worker of the running jobs")
@HUB_OPTION
@RAY_ADDRESS_OPTION
@CLIENT_TOKEN_OPTION
@click.option("--timeout", default=20.0, show_default=True, type=click.FloatRange(min=0.1),
              metavar="SECONDS",
              help="How long a process may take to run the link's code (a thread holding "
                   "its GIL in C delays that: the link then finishes later, on its own), "
                   "and then to be listed by the hub.")
@click.argument("selector", nargs=-1, metavar="[KEY=VALUE]...")
def link(hub: str | None, ray_address: str | None, client_token: str | None,
         timeout: float, selector: tuple[str, ...]) -> None:
    """Link running processes started without raydebug (a plain `python job.py`, a Ray job
    submitted without `raydebug run`): from then on they are live processes, as under
    `raydebug run`: in `ps` and `stacks`, pausable, armed with the cluster's breakpoints.

    It runs a few lines of Python inside each process (ptrace: it needs the rights py-spy
    needs: the process's user or root, or CAP_SYS_PTRACE); the process must be able to
    import raydebug. Linking a live process again does nothing."""
    terms = [_split(term) for term in selector]
    local = bool(terms) and all(key == "pid" for key, _ in terms)
    cluster = explicit_ray_address(ray_address) if hub is None else None
    if hub is None and cluster is None and not local:
        cluster = _ray_cluster_here()  # job=, node=, actor= or none: only Ray's make sense
    if cluster:
        _link_ray(cluster, client_token, timeout, terms)
        return
    if not local:
        raise click.UsageError("without a Ray cluster (--ray-address, or one running on "
                               "this machine), link takes pid=N terms: the processes of "
                               "this machine to link")
    location = locate_hub(hub, ray_address)
    _link_local(location, client_token, timeout, [int(value) for _, value in terms])


def _split(term: str) -> tuple[str, str]:
    key, equals, value = term.partition("=")
    key = key.strip().lower()
    if not equals or key not in RAY_KEYS or not value:
        raise click.UsageError(f"selector term {term!r}: link takes "
                               f"{', '.join(k + '=' for k in RAY_KEYS)} terms")
    if key == "pid" and not value.isdigit():
        raise click.UsageError(f"selector term {term!r}: a pid is a number")
    return key, value


def _link_local(location: HubLocation, token: str | None, timeout: float,
                pids: list[int]) -> None:
    from ..client import hub_api
    from ..linking.local import Outcome, exited_line, link_targets, screen, wait_listed
    from ..linking.target import runs

    refused, targets = screen(pids)  # what /proc says needs no hub
    if not targets:
        _report(refused)
        return
    agents = agents_hub(location)
    host = socket.gethostname()

    def listed() -> set[int]:
        return {int(p["pid"]) for p in hub_api.processes(location.address, (), token,
                                                         now=False)
                if p.get("host") == host and p.get("live") and isinstance(p.get("pid"), int)}

    with saying_how_to_get_a_hub(location):
        already = listed() & {target.pid for target in targets}
    outcomes = refused + [Outcome(pid, "already", f"pid {pid} was linked already")
                          for pid in sorted(already)]
    outcomes += link_targets([t for t in targets if t.pid not in already], agents,
                             timeout=timeout)

    def exited(unlisted: set[int]) -> set[int]:
        return {pid for pid in unlisted if not runs(pid)}

    linked = [o.pid for o in outcomes if o.status == "linked"]
    shown = wait_listed(linked, listed, timeout, exited) if linked else set()
    unlisted = set(linked) - shown
    gone = exited(unlisted) if unlisted else set()

    def listed_or_not(outcome: Outcome) -> Outcome:
        if outcome.pid not in unlisted:
            return outcome
        if outcome.pid in gone:
            return replace(outcome, status="exited", line=exited_line(outcome.pid))
        return replace(outcome, status="failed", line=(
            f"pid {outcome.pid}: linked, but the hub at {location.describe()} did not list "
            f"it within {timeout:g} s (its stderr says why)"))

    _report([listed_or_not(outcome) for outcome in outcomes])


def _report(outcomes: Sequence[Any]) -> None:
    """One line per process (a refusal or failure in red, on stderr); exit status 1 when
    one was not linked."""
    failed = False
    for outcome in outcomes:
        if outcome.ok:
            click.echo(outcome.line)
        else:
            error(outcome.line)
            failed = True
    if failed:
        sys.exit(1)


def agents_hub(location: HubLocation) -> Any:
    """Where a linked process dials the hub found at ``location``, with its token: the
    hub started on this machine (its state file), or the hub of the Ray cluster found (as
    the cluster publishes it to its workers), else ``RAYDEBUG_HUB`` and ``RAYDEBUG_TOKEN``
    as for any process. Raises :class:`ConfigurationError` saying what to set."""
    from .. import state_file
    from ..agent.config import AgentConfig
    from ..linking.ticket import HubForAgents

    local = state_file.read()
    if local is not None and str(local["client"]) == location.address:
        return HubForAgents(str(local["worker"]), str(local["token"]),
                            str(local.get("cert") or "") or None)
    if location.gcs:  # `link pid=N` on a Ray node: the cluster's hub, read where it was found
        from ..integrations.ray import connect_kv, read_hub_info

        connect_kv(location.gcs)
        published = read_hub_info()
        if published is not None and published.client == location.address:
            return HubForAgents(published.worker, published.token, published.cert or None)
    try:
        config = AgentConfig.from_env()
    except ConfigurationError:
        config = None
    if config is None or config.discover:
        if location.is_default:  # nothing was found: "not started here" would mislead
            raise ConfigurationError(
                "no hub was found on this machine: start one with `raydebug hub` (in "
                "another terminal), then link again")
        raise ConfigurationError(
            f"the hub at {location.describe()} was not started on this machine: set "
            "RAYDEBUG_HUB and RAYDEBUG_TOKEN (as `raydebug hub` prints them) to say where "
            "linked processes dial it")
    return HubForAgents(f"{config.hub_host}:{config.hub_port}", config.token, config.hub_cert)


def _ray_cluster_here() -> str | None:
    """The GCS address of the Ray cluster running on this machine, None when none runs (or
    ray is not installed); :class:`HubUnreachableError` naming them when several do."""
    try:
        from ..integrations.ray import running_gcs_address
    except ImportError:
        return None
    return running_gcs_address()


def _link_ray(ray_address: str, token: str | None, timeout: float,
              terms: list[tuple[str, str]]) -> None:
    from ..integrations.ray.link_jobs import link_cluster

    outcomes, hub, jobs = link_cluster(ray_address, terms, token, timeout, say=note)
    if not outcomes:
        running = f" (running jobs: {', '.join(jobs)})" if jobs else " (no job runs there)"
        error(f"no process of a running job matches {' '.join(f'{k}={v}' for k, v in terms)} "
              f"on the cluster of the hub at {hub}{running}" if terms
              else f"no job runs on the cluster of the hub at {hub}")
        sys.exit(1)
    _report(outcomes)
