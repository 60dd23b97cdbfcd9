"""Where the CLI finds the hub, and how it says where it looked.

In order: ``--hub`` (or ``RAYDEBUG_CLIENT_ADDRESS``); an explicit Ray address (``--ray-address``
or ``RAY_ADDRESS``), whose cluster's hub wins over any hub of this machine; the hub started on
this machine (its state file); a Ray cluster running on this machine; else the default port.
A Ray cluster without a hub gets one, as its first pause would start it (``start=True``).
Every step is bounded: a cluster that does not answer is an error that says so, not a hang.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from dataclasses import dataclass

from ..client.hub_api import DEFAULT_HUB
from ..errors import ConfigurationError, HubUnreachableError
from .output import note


@dataclass(frozen=True)
class HubLocation:
    """A hub's client address (``host:port``) and, for messages, how it was found."""

    address: str
    found_by: str  # e.g. "--hub", "the hub of the Ray cluster at 127.0.0.1:6379"
    unix: str | None = None  # the Unix socket of a hub started on this machine, if any
    is_default: bool = False  # nothing was found: the default address, a guess
    gcs: str | None = None  # the GCS address of the Ray cluster whose hub this is

    def describe(self) -> str:
        """``127.0.0.1:5678 (the Ray cluster at ...)``: where a command looked."""
        return f"{self.address} ({self.found_by})"


@contextlib.contextmanager
def saying_how_to_get_a_hub(location: HubLocation) -> Iterator[None]:
    """Within it, a :class:`HubUnreachableError` at a hub nobody named (the default address,
    ``location.is_default``) is raised again saying how to get one; any other passes as it is."""
    try:
        yield
    except HubUnreachableError as unreachable:
        if not location.is_default:
            raise
        raise HubUnreachableError(
            f"{unreachable}; no hub or Ray cluster was found on this machine: start one "
            "with `raydebug hub`, or pass --hub HOST:PORT or --ray-address",
            address=unreachable.address) from None


def explicit_ray_address(flag: str | None) -> str | None:
    """``--ray-address``, else ``RAY_ADDRESS``: a cluster the user named. A ``RAY_ADDRESS``
    with a scheme (``http://`` for ``ray job submit``, ``ray://`` for Ray Client) names no
    GCS and is left to the commands it is meant for."""
    if flag:
        return flag
    variable = os.environ.get("RAY_ADDRESS", "")
    return variable if variable and "://" not in variable else None


def locate_hub(hub: str | None, ray_address: str | None, start: bool = True) -> HubLocation:
    """The hub to talk to (see the module docstring). ``start``: start the hub actor of a
    Ray cluster that has none (False for shell completion, which must stay quick and must
    not change the cluster). Raises :class:`HubUnreachableError` or
    :class:`ConfigurationError` when a hub the user named cannot be reached."""
    if hub:
        return HubLocation(hub, "--hub")
    named = explicit_ray_address(ray_address)
    if named:
        return _cluster_hub(named, start, required=True) or _default()
    from .. import state_file  # (pathlib, urllib.parse: ~5 ms of a start) not with --hub

    local = state_file.read()
    if local is not None:
        return HubLocation(str(local["client"]),
                           f"the hub started on this machine, pid {local['pid']}",
                           unix=str(local["unix"]) if local.get("unix") else None)
    return _cluster_hub(None, start, required=False) or _default()


def _default() -> HubLocation:
    return HubLocation(DEFAULT_HUB, "the default address: no hub or Ray cluster was found "
                                    "on this machine", is_default=True)


def _cluster_hub(address: str | None, start: bool, required: bool) -> HubLocation | None:
    """The hub of the Ray cluster at ``address`` (None: one running on this machine, if
    any). None only when no cluster was found and none was ``required`` (the caller falls
    back); a cluster that was found but cannot be read is an error either way."""
    try:
        from ..integrations import ray as ray_integration
    except ImportError:
        if required:
            raise ConfigurationError(
                "a Ray address was given (--ray-address or RAY_ADDRESS) but ray is not "
                "installed: pip install 'raydebug[ray]'") from None
        return None
    if address is None:
        # Several clusters here is no reason to fall back to the default address: that
        # would name none of them, or reach the hub of any one.
        address = ray_integration.running_gcs_address()
        if address is None:
            return None
    if start:
        from ..integrations.ray.hub_starter import starting_hub

        info, gcs = ray_integration.find_or_start_cluster_hub(
            address, lambda gcs: note(starting_hub(gcs)))
    else:
        gcs = ray_integration.connect_kv(address)
        published = ray_integration.read_hub_info()
        if published is None:
            raise HubUnreachableError(f"the Ray cluster at {gcs} has no raydebug hub yet")
        info = published
    return HubLocation(info.client, f"the hub of the Ray cluster at {gcs}", gcs=gcs)
