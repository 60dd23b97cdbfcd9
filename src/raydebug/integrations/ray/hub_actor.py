"""The cluster's hub as a detached Ray actor, started once; the only module of the Ray
integration that imports the hub.

Theory of operation. When nothing is published in the KV (see :mod:`.discovery`), a worker
that pauses asks Ray for the named detached actor ``raydebug_hub`` on the head node with
``get_if_exists``, which GCS creates exactly once however many workers ask at the same moment
(:func:`find_or_start_hub`). The actor starts a :class:`~raydebug.hub.Hub` in its event loop
and publishes it; a published actor hub that cannot be reached and whose actor is gone is
forgotten, and a new actor starts (a dead detached actor's name is free again). The actor
leaves when its node drains, so that ``ray stop`` does not wait for its lease, and first tells
the processes paused on it to go on (they hold leases too).
"""

from __future__ import annotations

import asyncio
import os
from dataclasses import asdict
from typing import Any

import ray

from ...agent.flags import is_on
from ...errors import ConfigurationError, HubUnreachableError, RaydebugError
from .discovery import (
    HubInfo,
    publish_hub_info,
    read_hub_info,
    unpublish_hub_info,
)
from .kv import publish_breakpoints_of
from .metadata import node_ip

HUB_ACTOR_NAME = "raydebug_hub"
HUB_ACTOR_NAMESPACE = "raydebug"
HEAD_NODE_RESOURCE = "node:__internal_head__"
DEFAULT_CLIENT_PORT = 5678
HUB_START_TIMEOUT = 60.0
# How often the hub actor asks the GCS whether its node is draining (ray stop, SIGTERM to
# `ray start --block`): the node waits for every lease to be returned, for up to 30 s.
DRAIN_POLL_INTERVAL = 1.0


def find_or_start_hub(stale: object = None, start: bool = True) -> HubInfo:
    """The cluster's hub: the published one, or the detached actor, started once
    (``start=False``: only the published one).

    ``stale`` is a hub we could not connect to, as :meth:`HubInfo.address` gave it to the
    agent: if the KV still names it, it is forgotten and the actor asked for (a dead
    detached actor's name is free again, so a new one starts). Raises
    :class:`HubUnreachableError` when Ray cannot start it.
    """
    info = read_hub_info()
    if info is not None and _is(info, stale) and info.owner == "actor" \
            and not _hub_actor_alive():
        unpublish_hub_info(info)
        info = None
    if info is not None:
        return info
    if not start:
        raise HubUnreachableError("the cluster has no raydebug hub now (the last one shut down)")
    try:
        actor = hub_actor_class().options(
            name=HUB_ACTOR_NAME, namespace=HUB_ACTOR_NAMESPACE, lifetime="detached",
            get_if_exists=True, num_cpus=0, resources={HEAD_NODE_RESOURCE: 0.001},
            # Ray runs an async actor on uvloop when it is installed (ray[serve] brings it);
            # the hub is written for, and tested on, asyncio's own loop (uvloop's transports
            # are no asyncio.Transport: the agent listener refused every process).
            runtime_env={"env_vars": {"RAY_USE_UVLOOP": "0"}},
        ).remote()
        from ...hub_options import hub_options_wanted  # (argparse) not on a worker's way in

        started = actor.start.remote(tls=hub_tls_wanted(), options=hub_options_wanted())
        # Not ray.get(): in an async actor's process it logs "Using blocking ray.get inside
        # async actor", which the user's code did not cause (this runs on raydebug's thread).
        data = started.future().result(timeout=HUB_START_TIMEOUT)
    except ConfigurationError:
        raise
    except Exception as error:  # Ray's errors are many; the user needs one line
        raise HubUnreachableError(f"could not start the raydebug hub actor: {error}") from None
    return HubInfo(**data)


def _is(info: HubInfo, address: object) -> bool:
    try:
        return address is not None and info.address() == address
    except RaydebugError:  # a published worker address that is no host:port
        return False


def hub_tls_wanted() -> bool:
    """``RAYDEBUG_HUB_TLS=1`` (in the job's environment): the hub actor, if this process
    starts it, serves workers over TLS; they pin its certificate through the KV."""
    return is_on(os.environ.get("RAYDEBUG_HUB_TLS"))


def _hub_actor_alive() -> bool:
    try:
        ray.get_actor(HUB_ACTOR_NAME, namespace=HUB_ACTOR_NAMESPACE)
    except ValueError:
        return False
    return True


_actor_class: Any = None


def hub_actor_class() -> Any:
    global _actor_class
    if _actor_class is None:
        _actor_class = ray.remote(_HubActor)
    return _actor_class


class _HubActor:
    """The hub, as a detached async actor on the head node (no CPU reserved).

    A detached actor holds its worker lease forever, and a node being stopped (``ray stop``,
    SIGTERM to ``ray start --block``) waits up to 30 s for every lease to be returned
    before it gives up and kills its processes. So the actor watches its node's drain state
    and, once the node drains, stops serving, unpublishes itself and exits.
    """

    def __init__(self) -> None:
        from ...agent import retire_live_link

        retire_live_link()  # this worker is the hub: not linked to itself (see HubLink.retire)
        self._info: HubInfo | None = None
        self._lock = asyncio.Lock()
        self._hub: Any = None
        self._serving: Any = None
        self._watching: Any = None

    async def start(self, tls: bool = False,
                    options: dict[str, Any] | None = None) -> dict[str, Any]:
        """Start serving once; return the HubInfo as a dict (every caller gets the same).

        The first call decides ``tls`` (the agent listener over TLS, its certificate's
        fingerprint in the HubInfo) and the hub's other ``options`` (HubConfig fields, from
        :func:`hub_options_wanted`). Publishes it again on every call: a hub started by
        hand may have replaced it in the KV and gone since, and whoever calls found the KV
        empty.
        """
        async with self._lock:
            if self._info is None:
                self._info = await self._start(tls, options or {})
            publish_hub_info(self._info)
        return asdict(self._info)

    async def _start(self, tls: bool, options: dict[str, Any]) -> HubInfo:
        from ...hub import Hub, HubConfig

        ip = node_ip()
        for port in (DEFAULT_CLIENT_PORT, 0):  # 5678, or any port when it is taken
            hub = Hub(HubConfig(port=port, agent_host=ip, agent_port=0, tls=tls, **options))
            try:
                await hub.start()
                break
            except OSError:
                await hub.close()
        self._hub = hub
        publish_breakpoints_of(hub)
        self._serving = asyncio.ensure_future(hub.serve_forever())
        self._watching = asyncio.ensure_future(self._exit_when_node_drains())
        return HubInfo(worker="{}:{}".format(*hub.agent_address),
                       client="{}:{}".format(*hub.client_address),
                       token=hub.config.token, owner="actor", node_ip=ip, pid=os.getpid(),
                       cert=hub.certificate.fingerprint if hub.certificate else "")

    async def _exit_when_node_drains(self) -> None:
        """Poll the GCS (it has no notification for this) until this node is draining, then
        ask this actor to :meth:`stop` (an actor exits only from one of its own methods)."""
        node_id = ray.get_runtime_context().get_node_id()
        gcs = ray._private.worker.global_worker.gcs_client  # type: ignore[attr-defined]
        while True:
            await asyncio.sleep(DRAIN_POLL_INTERVAL)
            try:
                draining = await asyncio.to_thread(gcs.get_draining_nodes, timeout=5)
            except Exception:  # a GCS that is restarting or gone: try again
                continue
            if node_id in draining:
                break
        ray.get_runtime_context().current_actor.stop.remote()

    async def stop(self) -> None:
        """Tell the paused processes to go on, stop serving, take the hub out of the KV, and
        end this actor.

        A paused task holds its worker's lease as the actor does: its agent, told the hub is
        closing, lets every paused thread run on, so the node's drain does not wait 30 s.
        """
        if self._hub is not None:
            from ...protocol.control import HubClosing

            # Every linked process, not only the paused ones: a live link that lost its hub
            # would otherwise start a new hub actor on the node that is draining.
            registry = self._hub.registry
            processes = {*registry.all_processes(),
                         *(session.process for session in registry.all_sessions())}
            for process in processes:
                process.send(HubClosing(reason="its Ray node is stopping"))  # written at once
            self._serving.cancel()
            await self._hub.close()
        if self._info is not None:
            try:
                unpublish_hub_info(self._info)
            except Exception:  # the GCS may already be going away; the node is stopping
                pass
        ray.actor.exit_actor()
