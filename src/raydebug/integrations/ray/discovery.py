"""Finding the cluster's hub through Ray's GCS, and finding the cluster itself.

Theory of operation. A hub publishes its addresses and token in the GCS internal KV
(namespace ``raydebug``, key ``hub``) as a :class:`HubInfo`. A worker that pauses reads it
(starting the hub actor when nothing is published: see :mod:`.hub_actor`); a hub started by
hand (``raydebug hub --ray-address``, :func:`publish_cli_hub`) publishes over the actor and
so takes precedence. The CLI, which is no Ray driver, reaches the KV with a bare GCS client
(:func:`connect_kv`), every step bounded, after finding which cluster is meant
(:func:`find_gcs_address`).
"""

from __future__ import annotations

import json
import os
import socket
import time
from dataclasses import asdict, dataclass
from typing import Any

import ray

from ...agent.link.discovery import HubAddress
from ...errors import ConfigurationError, HubUnreachableError, hub_unreachable
from .cluster_auth import GCS_CONNECT_TIMEOUT as GCS_CONNECT_TIMEOUT
from .cluster_auth import gcs_client
from .kv import KV_NAMESPACE, publish_breakpoints

KV_HUB_KEY = b"hub"


@dataclass(frozen=True)
class HubInfo:
    """What the KV says about the cluster's hub."""

    worker: str  # host:port workers dial
    client: str  # host:port (on the hub's node) for DAP and HTTP clients
    token: str
    owner: str  # "actor" or "cli"
    node_ip: str
    pid: int
    cert: str = ""  # with TLS: the fingerprint of the agent listener's certificate

    def to_json(self) -> bytes:
        return json.dumps(asdict(self)).encode()

    @classmethod
    def from_json(cls, data: bytes) -> HubInfo:
        """Raises ValueError or TypeError when ``data`` is not a HubInfo."""
        return cls(**json.loads(data))

    def address(self) -> HubAddress:
        """Where workers dial it, as the agent's discovery returns it.
        Raises :class:`~raydebug.errors.ConfigurationError` when ``worker`` is no host:port."""
        from ...agent.config import parse_address  # (not on a worker's setup hook's way)

        host, port = parse_address(self.worker, "the hub's worker address")
        return HubAddress(host, port, self.token, self.cert or None)


def read_hub_info() -> HubInfo | None:
    from ray.experimental import internal_kv

    data = internal_kv._internal_kv_get(KV_HUB_KEY, namespace=KV_NAMESPACE)
    if not data:
        return None
    try:
        return HubInfo.from_json(data)
    except (ValueError, TypeError):
        return None


def wait_hub_info(timeout: float) -> HubInfo | None:
    """:func:`read_hub_info`, waiting up to ``timeout`` s for a hub to be published.

    The KV offers no notification, so this polls it (every 0.2 s), bounded by ``timeout``.
    """
    deadline = time.monotonic() + timeout
    while True:
        info = read_hub_info()
        if info is not None or time.monotonic() >= deadline:
            return info
        time.sleep(min(0.2, max(0.0, deadline - time.monotonic())))


def publish_hub_info(info: HubInfo) -> None:
    from ray.experimental import internal_kv

    internal_kv._internal_kv_put(KV_HUB_KEY, info.to_json(), overwrite=True,
                                 namespace=KV_NAMESPACE)


def unpublish_hub_info(info: HubInfo) -> None:
    """Remove the KV entry, and the breakpoints it published, if it still describes ``info``
    (a later hub may have replaced it)."""
    from ray.experimental import internal_kv

    if read_hub_info() == info:
        internal_kv._internal_kv_del(KV_HUB_KEY, namespace=KV_NAMESPACE)
        publish_breakpoints(None)


def publish_cli_hub(client: str, worker: str, token: str, cert: str | None = None) -> HubInfo:
    """Publish a hub started by ``raydebug hub --ray-address``: it replaces any other.
    ``cert``: its certificate's fingerprint, which workers then pin (``--tls``)."""
    info = HubInfo(worker=worker, client=client, token=token, owner="cli",
                   node_ip=worker.rsplit(":", 1)[0], pid=os.getpid(), cert=cert or "")
    publish_hub_info(info)
    return info


def find_gcs_address(address: str | None) -> str:
    """The GCS address (``host:port``) of the cluster that ``address`` names: a GCS
    address, or ``auto``/None for ``RAY_ADDRESS`` (unless it is a dashboard or Ray Client
    URL), else one running on this machine: the latest ``ray start`` if it answers, else
    the only GCS that answers. Raises :class:`HubUnreachableError` saying
    why (none found, or several and no way to choose).

    Unlike Ray's ``canonicalize_bootstrap_address``, a loopback address stays loopback: a
    cluster on 127.0.0.1 does not listen on the machine's network address.
    """
    if address and address != "auto":
        if "://" in address:
            raise HubUnreachableError(
                f"{address} is not a Ray GCS address (HOST:PORT, e.g. 127.0.0.1:6379); a "
                "dashboard (http://) or Ray Client (ray://) address cannot be used")
        return address
    variable = os.environ.get("RAY_ADDRESS", "")
    if variable and "://" not in variable and variable != "auto":
        return variable
    running = running_gcs_address()
    if running is None:
        raise HubUnreachableError("no Ray cluster found on this machine")
    return running


def running_gcs_address() -> str | None:
    """The GCS address of the Ray cluster running on this machine: the latest ``ray start``
    if it answers, else the only GCS that answers; None when none answers. Raises
    :class:`HubUnreachableError` when several answer (naming them: the user must choose)
    or the search itself fails."""
    from ray._private.services import find_bootstrap_address, find_gcs_addresses

    try:
        latest = find_bootstrap_address(None)
        running = sorted(find_gcs_addresses())
    except Exception as error:  # reading /tmp/ray or the process table failed
        raise HubUnreachableError(f"cannot look for a local Ray cluster: {error}") from None
    if latest and _answers(latest):
        return str(latest)
    answering = [found for found in running if _answers(found)]
    if len(answering) > 1:
        raise HubUnreachableError(
            f"{len(answering)} Ray clusters run on this machine ({', '.join(answering)}): "
            "choose one with --ray-address or RAY_ADDRESS")
    return str(answering[0]) if answering else None


def _answers(address: str, timeout: float = 3.0) -> bool:
    """Whether something accepts TCP connections at ``host:port`` (within ``timeout``)."""
    try:
        _probe(address, timeout)
    except (OSError, ValueError):
        return False
    return True


def _probe(address: str, timeout: float) -> None:
    host, _, port = address.rpartition(":")
    with socket.create_connection((host.strip("[]"), int(port)), timeout=timeout):
        pass


def connect_kv(address: str | None) -> str:
    """Reach the cluster's KV from a process that is not a Ray driver (the CLI); return the
    GCS address used (see :func:`find_gcs_address`).

    Bounded: a port that does not answer is refused within 3 s, a GCS that does not
    finish the handshake within :data:`GCS_CONNECT_TIMEOUT`. A cluster that asks for its
    token gets Ray's own when this machine has it (:mod:`.cluster_auth`, which then also
    holds for the processes this one starts). Raises :class:`HubUnreachableError` saying
    why.
    """
    from ray.experimental import internal_kv

    if ray.is_initialized() or internal_kv._internal_kv_initialized():
        return address or "auto"
    gcs_address = find_gcs_address(address)
    host, _, port = gcs_address.rpartition(":")
    if not host or not port.isdigit():
        raise ConfigurationError(f"{gcs_address!r} is not a Ray cluster's address: give "
                                 "HOST:PORT of its GCS (what `ray start --head` printed)")
    try:
        _probe(gcs_address, timeout=3.0)
    except (OSError, ValueError) as error:
        raise hub_unreachable(gcs_address, error, saying="no Ray cluster answers at") from None
    client = gcs_client(gcs_address)
    if isinstance(client, Exception):
        failure = str(client)
        first_line = failure.splitlines()[0][:200] if failure else type(client).__name__
        raise HubUnreachableError(
            f"cannot read the Ray cluster's KV at {gcs_address}: {first_line}")
    internal_kv._initialize_internal_kv(client)
    return gcs_address


LOOPBACK_VARIABLE = "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"  # "0": Ray keeps 127.0.0.1 as given


def stays_on_loopback(gcs_address: str, client: Any) -> bool:
    """Whether a driver of the cluster at ``gcs_address`` (``client``: a GcsClient of it)
    must keep to loopback: the address is loopback and the cluster has a node there. Ray
    would rewrite 127.0.0.1 to the machine's network address, where such a cluster does
    not listen; a cluster on that address also answers at 127.0.0.1 and needs the rewrite."""
    if not gcs_address.startswith(("127.", "localhost:", "[::1]:")):
        return False
    try:
        nodes = client.get_all_node_info(timeout=5)
    except Exception:  # Ray's errors are many: keep the address the user gave
        return True
    return any(node.state == node.ALIVE and node.node_manager_address.startswith("127.")
               for node in nodes.values())


def driver_environment(gcs_address: str) -> dict[str, str]:
    """What a Ray driver of the cluster at ``gcs_address`` needs in its environment to
    connect as the CLI does, of what the user did not set: ``RAY_AUTH_MODE=token`` when
    the cluster asks for its token and Ray's is here (:mod:`.cluster_auth`), and
    ``RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0`` when it must keep to loopback
    (:func:`stays_on_loopback`). Empty when nothing answers there (the driver says so).
    Raises :class:`HubUnreachableError` when the cluster asks for a token and none fits."""
    from .cluster_auth import AUTH_MODE_VARIABLE

    unset = [name for name in (AUTH_MODE_VARIABLE, LOOPBACK_VARIABLE) if name not in os.environ]
    if not unset or not _answers(gcs_address):
        return {}
    client = gcs_client(gcs_address)
    if isinstance(client, Exception):  # not for us to say: the driver will
        return {}
    env = {}
    if AUTH_MODE_VARIABLE in unset and AUTH_MODE_VARIABLE in os.environ:  # turned on
        env[AUTH_MODE_VARIABLE] = os.environ[AUTH_MODE_VARIABLE]
    if LOOPBACK_VARIABLE in unset and stays_on_loopback(gcs_address, client):
        env[LOOPBACK_VARIABLE] = "0"
    return env


def local_node_ip() -> str:
    """This machine's address as Ray sees it (loopback when Ray is told to use it)."""
    from ray._private.services import get_node_ip_address

    return str(get_node_ip_address())  # type: ignore[no-untyped-call]
