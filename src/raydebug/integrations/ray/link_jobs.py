"""``raydebug link`` on a Ray cluster: which workers, and linking them from their own nodes.

Theory of operation. The CLI finds (or starts) the cluster's hub as every command does;
a short-lived driver, in a child process as the hub's starter's (bounded, ended by Ctrl-C,
kept to a loopback cluster's loopback: :func:`.hub_starter.run_in_driver`), reads the
running jobs' workers and drivers from the GCS's tables (:func:`running_processes`; the
ones ``job=``, ``node=``, ``actor=``, ``pid=`` pick: :func:`pick`), and for each node that
has some, sends one task pinned there
(``NodeAffinitySchedulingStrategy``, ``num_cpus=0``: it waits for no CPU a job holds) links
them with :mod:`raydebug.linking` (ptrace works only on the process's own machine); the
child prints the outcomes, and the CLI asks the hub until it lists them.

Inside a linked Ray worker, :func:`as_ray_process` gives the agent what raydebug's setup hook
would have: Ray's discovery (what a task runs now, for ``ps`` and ``stacks``), raydebug's
``breakpoint()``, the functions Ray shipped by value (for breakpoints armed on 3.10/3.11),
and the worker's ids.
"""

from __future__ import annotations

import contextlib
import json
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, replace
from typing import Any

import ray
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

from ...agent.link import discovery


def as_ray_process() -> dict[str, Any]:
    """In a Ray worker or driver being linked (on the thread the bootstrap runs on):
    install Ray's discovery and raydebug's ``breakpoint()`` (a driver's: pdb in its
    terminal, as under ``raydebug run``); return the process's ids for its record (``{}``
    when Ray is not connected here)."""
    from .metadata import in_ray_worker, live_identity
    from .worker_hooks import RayDiscovery

    if not in_ray_worker():
        return {}
    from ...agent import driver_breakpoint, set_trace

    discovery.install(RayDiscovery())
    # A driver's breakpoint() opens pdb in its terminal, as under `raydebug run`.
    driver = ray._private.worker.global_worker.mode == ray.SCRIPT_MODE
    sys.breakpointhook = driver_breakpoint if driver else set_trace
    if not driver and sys.version_info < (3, 12):  # as the setup hook would (3.10/3.11)
        _follow_shipped_functions()
    try:
        return dict(live_identity())
    except Exception:  # Ray's errors are many; the link works without the ids
        return {}


def _follow_shipped_functions() -> None:
    """Hand the armed breakpoints the functions Ray shipped by value to this worker, those
    it rebuilt before the link and those to come: a linked actor's method (its class
    unpickled at the actor's start) never stopped at a `raydebug break` line on 3.10/3.11,
    no module namespace leading to it (docs/design.md#armed)."""
    from ...agent.armed.shipped import made
    from .shipped_functions import follow, made_before

    follow(made)
    for function in made_before():
        made(function)


@dataclass(frozen=True)
class RayProcess:
    """A worker (or driver) of a running job, from the GCS: where it runs and its ids."""

    pid: int
    node_id: str
    node_ip: str
    job_id: str
    worker_id: str = ""
    actor_class: str = ""
    driver: bool = False

    def identity(self) -> dict[str, Any]:
        """What the linked process registers with (as a setup hook's ``live_identity``)."""
        ids = {"job_id": self.job_id, "node_id": self.node_id, "node_ip": self.node_ip,
               "worker_id": self.worker_id or None}
        return {name: value for name, value in ids.items() if value}


def pick(processes: list[RayProcess], terms: list[tuple[str, str]]) -> list[RayProcess]:
    """Those of ``processes`` that every ``(key, value)`` term matches: ``job`` (a prefix of
    the job id; a worker's job, not known outside it, is checked inside: see
    :func:`picked_jobs`), ``node`` (a prefix of the node id, or its address), ``actor``
    (the class), ``pid``. No terms: all."""
    def matches(process: RayProcess, key: str, value: str) -> bool:
        if key == "job":
            return not process.job_id or process.job_id.startswith(value.lower())
        if key == "node":
            return process.node_id.startswith(value.lower()) or process.node_ip == value
        if key == "actor":
            return process.actor_class == value
        return key == "pid" and str(process.pid) == value

    return [p for p in processes if all(matches(p, key, value) for key, value in terms)]


def picked_jobs(running: list[str], terms: list[tuple[str, str]]) -> list[str]:
    """The running jobs that the ``job=`` terms pick (all without one)."""
    prefixes = [value.lower() for key, value in terms if key == "job"]
    return [job for job in running if all(job.startswith(prefix) for prefix in prefixes)]


def running_processes(own_job: str, hub_pid: int | None) -> tuple[list[RayProcess], list[str]]:
    """The cluster's live workers, from the GCS's worker, actor and job tables (what Ray's
    state API reads; no dashboard needed), and each running job's driver where it runs on
    a node of the cluster; and the running jobs. The GCS does not say which job a worker
    serves (a worker started ahead of its job says none): its bootstrap tells, inside.
    ``own_job`` (the linker's) and the hub actor's worker are left out. Called in a
    connected driver, or after :func:`read_tables_of`."""
    from ray._private import state as ray_state
    from ray.core.generated import common_pb2, gcs_pb2

    state = ray_state.state
    jobs = {job["JobID"]: job for job in state.job_table() if not job["IsDead"]}
    jobs.pop(own_job, None)
    nodes = {node["NodeID"]: node["NodeManagerAddress"] for node in state.node_table()
             if node.get("Alive")}
    classes = {(actor["Address"]["NodeID"], actor["Pid"]): actor["ActorClassName"]
               for actor in state.actor_table(None).values() if actor.get("State") == "ALIVE"}
    accessor = state._connect_and_get_accessor()
    found = []
    for raw in accessor.get_worker_table():
        worker = gcs_pb2.WorkerTableData.FromString(raw)  # type: ignore[attr-defined]
        node = worker.worker_address.node_id.hex()
        if (not worker.is_alive
                or worker.worker_type != common_pb2.WORKER  # type: ignore[attr-defined]
                or node not in nodes or worker.pid == hub_pid):
            continue
        found.append(RayProcess(worker.pid, node, nodes[node], "",
                                worker.worker_address.worker_id.hex(),
                                classes.get((node, worker.pid), "")))
    for job_id, job in jobs.items():  # drivers, on the node of their address
        node = next((n for n, ip in nodes.items() if ip == job["DriverIPAddress"]), None)
        if node is not None and job["DriverPid"]:
            found.append(RayProcess(int(job["DriverPid"]), node, nodes[node], job_id,
                                    driver=True))
    return found, sorted(jobs)


def read_tables_of(gcs_address: str) -> None:
    """Point Ray's GCS tables (``ray._private.state``) at the cluster the CLI reached with
    :func:`~.discovery.connect_kv`, without a driver (~0.1 s, not the seconds of a
    ``ray.init``)."""
    from ray._private import state
    from ray._raylet import GcsClientOptions  # type: ignore[attr-defined]
    from ray.experimental import internal_kv

    client = internal_kv.internal_kv_get_gcs_client()
    state.state._initialize_global_state(GcsClientOptions.create(
        gcs_address, client.cluster_id.hex(), allow_cluster_id_nil=False,
        fetch_cluster_id_if_nil=False))


def unlinked(processes: list[RayProcess], linked: set[tuple[str, int]]) -> list[RayProcess]:
    """The workers of ``processes`` whose ``(node_id, pid)`` is not ``linked``."""
    return [p for p in processes if not p.driver and (p.node_id, p.pid) not in linked]


def unlinked_notice(count: int, gcs_address: str) -> str:
    """What ``raydebug ps`` says under its table when ``count`` workers are not linked."""
    if not count:
        return ""
    workers = "1 Ray worker is" if count == 1 else f"{count} Ray workers are"
    return (f"{workers} not linked (idle ones among them): `raydebug link --ray-address "
            f"{gcs_address}` links those of the running jobs")


def unlinked_line(gcs_address: str, hub_processes: list[dict[str, Any]]) -> str:
    """:func:`unlinked_notice` for the cluster at ``gcs_address`` (reached by
    :func:`~.discovery.connect_kv`) and the processes its hub lists; "" when every worker
    is linked, or the GCS cannot say (a hint: never an error)."""
    from .discovery import read_hub_info

    try:
        read_tables_of(gcs_address)
        hub = read_hub_info()
        processes, _ = running_processes("", hub.pid if hub else None)
    except Exception:  # Ray's errors are many; ps has said what it came for
        return ""
    linked = {(str(p.get("node_id")), int(p["pid"])) for p in hub_processes
              if isinstance(p.get("pid"), int)}
    return unlinked_notice(len(unlinked(processes, linked)), gcs_address)


NODE_TASK_TIMEOUT = 60.0  # seconds for a node's linking task (its processes in parallel)
DRIVER_WORK_TIMEOUT = NODE_TASK_TIMEOUT + 30.0  # and the child driver's reading the tables


@ray.remote(num_cpus=0)
def link_on_this_node(pids: list[int], hub: dict[str, Any],
                      identities: dict[int, dict[str, Any]],
                      jobs: list[str], timeout: float) -> list[dict[str, Any]]:
    """Ray task, pinned to a node: link those of ``pids`` of this node that run one of
    ``jobs`` (:mod:`raydebug.linking`), each outcome as a dict."""
    from ...linking.local import link_pids
    from ...linking.ticket import HubForAgents

    outcomes = link_pids(pids, HubForAgents(**hub), identities, jobs, timeout)
    return [asdict(outcome) for outcome in outcomes]


def link_from_driver(argument: str) -> dict[str, Any]:
    """In the child driver of :func:`link_cluster` (``argument``: its JSON): pick the
    processes, link them from a task on each of their nodes; the ``[process, outcome]``
    pairs as dicts (a node's task that failed or did not end in time: its processes
    ``failed``) and the running jobs."""
    from ...linking.local import Outcome

    asked = json.loads(argument)
    terms = [(key, value) for key, value in asked["terms"]]
    timeout = float(asked["timeout"])
    own_job = ray.get_runtime_context().get_job_id()
    processes, running = running_processes(own_job, asked["pid"])
    jobs = picked_jobs(running, terms)
    by_node: dict[str, list[RayProcess]] = {}
    for process in pick(processes, terms):
        by_node.setdefault(process.node_id, []).append(process)
    calls = {node: link_on_this_node.options(
                scheduling_strategy=NodeAffinitySchedulingStrategy(node, soft=False)
             ).remote([p.pid for p in group], asked["hub"],
                      {p.pid: p.identity() for p in group}, jobs, timeout)
             for node, group in by_node.items()}
    outcomes: list[list[dict[str, Any]]] = []
    # One deadline for every node (their tasks run at once): one that hangs costs the
    # others nothing, and many cannot add up to more than the driver is given.
    deadline = time.monotonic() + NODE_TASK_TIMEOUT + timeout
    for node, call in calls.items():
        places = {p.pid: p for p in by_node[node]}
        try:
            answers = ray.get(call, timeout=max(deadline - time.monotonic(), 0.0))
        except Exception as error:  # the node's task failed or never ran: its processes say so
            why = str(error).strip().splitlines()[-1:] or [type(error).__name__]
            answers = [asdict(Outcome(pid, "failed", f"pid {pid}: the linking task on node "
                                                     f"{node[:8]} failed ({why[0]})"))
                       for pid in places]
            with contextlib.suppress(Exception):  # it may have ended meanwhile
                ray.cancel(call, force=True)
        outcomes += [[asdict(places[a["pid"]]), a] for a in answers if a["status"] != "skipped"]
    return {"outcomes": outcomes, "jobs": running}


def link_cluster(address: str | None, terms: list[tuple[str, str]], client_token: str | None,
                 timeout: float, say: Callable[[str], None] = lambda text: None
                 ) -> tuple[list[Any], str, list[str]]:
    """Link the running jobs' processes that ``terms`` pick, from a task on each of their
    nodes; wait until the hub lists them. Returns one outcome per process (a process
    linked but not listed in ``timeout`` is ``failed``; one that exited before its link or
    its listing, as the GCS says, ``exited``: Ray ends idle workers, and the linking task's
    own worker can take a node past its count), the hub's description and the running
    jobs' ids (what a ``job=`` that picks nothing could have named). ``say`` is told, in
    words, of the steps that take seconds (the hub's start, the linking tasks). The
    tasks are sent by a child driver (:func:`.hub_starter.run_in_driver`: kept to loopback
    as the hub's starter, bounded, ended by Ctrl-C); raises :class:`HubUnreachableError`
    when it cannot do its part."""
    from ...client import hub_api
    from ...linking.local import Outcome, exited_line, wait_listed
    from .hub_starter import (
        driver_keeps_to_loopback,
        find_or_start_cluster_hub,
        run_in_driver,
        starting_hub,
    )

    info, gcs = find_or_start_cluster_hub(address, lambda gcs: say(starting_hub(gcs)))
    hub = {"address": info.worker, "token": info.token, "cert": info.cert or None}
    say(f"linking from a task on each node of the Ray cluster at {gcs} (a few seconds)")
    answer = run_in_driver(
        gcs, driver_keeps_to_loopback(gcs), f"{__name__}:link_from_driver",
        json.dumps({"terms": terms, "hub": hub, "pid": info.pid, "timeout": timeout}),
        "run the linking tasks", DRIVER_WORK_TIMEOUT + timeout,
        f"the Ray cluster at {gcs} answers, but this machine could not {{step}} to link "
        "its processes")
    outcomes = [(RayProcess(**process), Outcome(**outcome))
                for process, outcome in answer["outcomes"]]
    where = f"{info.client} (the hub of the Ray cluster at {gcs})"

    def listed() -> set[tuple[str, int]]:
        return {(str(p.get("node_id")), int(p["pid"]))
                for p in hub_api.processes(info.client, (), client_token, now=False)
                if p.get("live") and isinstance(p.get("pid"), int)}

    def exited(unlisted: set[tuple[str, int]]) -> set[tuple[str, int]]:
        """Those of ``unlisted`` the GCS no longer has alive (none when it cannot say)."""
        try:
            read_tables_of(gcs)
            running, _ = running_processes("", info.pid)
        except Exception:  # Ray's errors are many: nothing is called exited on a guess
            return set()
        return unlisted - {(p.node_id, p.pid) for p in running}

    linked = [(p.node_id, p.pid) for p, o in outcomes if o.status == "linked"]
    shown = wait_listed(linked, listed, timeout, exited) if linked else set()
    unlisted = set(linked) - shown
    gone = exited(unlisted) if unlisted else set()
    said = []
    for process, outcome in outcomes:
        who = f"{process.node_ip} {'driver' if process.driver else 'worker'}: "
        place = (process.node_id, process.pid)
        if place in gone:
            outcome = replace(outcome, status="exited", line=who + exited_line(process.pid))
        elif outcome.status == "gone":  # between the GCS's listing and its link
            outcome = replace(outcome, status="exited",
                              line=f"{who}pid {process.pid} exited before it could be linked")
        elif place in unlisted:
            stderr = ("its stderr" if process.driver else
                      f"its stderr (Ray's worker logs on node {process.node_id[:8]})")
            outcome = replace(outcome, status="failed", line=(
                f"{who}{outcome.line}, but the hub did not list it within {timeout:g} s "
                f"({stderr} says why)"))
        else:
            outcome = replace(outcome, line=who + outcome.line)
        said.append(outcome)
    return said, where, list(answer.get("jobs", []))

