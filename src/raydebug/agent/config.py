"""The agent's settings, read from environment variables when a breakpoint is hit.

``RAYDEBUG_HUB``          host:port of the hub's agent listener (optional: a hub started
                          on this machine is found through its state file; inside Ray the
                          hub is found through the cluster, or started on the head node)
``RAYDEBUG_TOKEN``        the hub's worker token (inside Ray: found with the hub)
``RAYDEBUG_TOKEN_FILE``   a file holding the token instead (kept out of ``ps e`` and logs)
``RAYDEBUG_CLUSTER_HUB``  host:port of the Ray cluster's hub, set by raydebug in a Ray worker
                          for the processes it starts (they cannot ask Ray), with
                          ``RAYDEBUG_TOKEN_FILE``; ``RAYDEBUG_HUB`` takes precedence
``RAYDEBUG_HUB_CERT``     the certificate of a hub started with ``--tls``: its SHA-256
                          fingerprint as the hub prints it, or its PEM file; any other
                          certificate is refused (found with the hub's address otherwise)
``RAYDEBUG_WAIT_TIMEOUT`` seconds a paused thread waits for a hub and a client before it
                          gives up and continues (default: forever; 600 when ``CI`` is set,
                          so a forgotten ``breakpoint()`` cannot hang a pipeline)
``RAYDEBUG_POST_MORTEM``  ``1`` freezes the process on an uncaught exception
``RAYDEBUG_LABELS``       ``key=value,key=value``: labels of the process (see
                          :func:`process_labels`)
``RAYDEBUG_LABEL_<KEY>``  ``value``: the label ``KEY``
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass

from ..errors import ConfigurationError
from .flags import is_on

CI_WAIT_TIMEOUT = 600.0


@dataclass(frozen=True)
class AgentConfig:
    hub_host: str | None  # None: find the hub through the cluster (Ray)
    hub_port: int
    token: str
    wait_timeout: float | None
    post_mortem: bool = False
    hub_cert: str | None = None  # the pinned fingerprint of a TLS hub's certificate

    @property
    def discover(self) -> bool:
        return self.hub_host is None

    @property
    def hub_address(self) -> str:
        return "the cluster's hub" if self.discover else f"{self.hub_host}:{self.hub_port}"

    @classmethod
    def from_env(cls, environ: Mapping[str, str] = os.environ,
                 in_cluster: bool = False) -> AgentConfig:
        """Read the settings; raises :class:`ConfigurationError` naming the variable.

        ``in_cluster``: this process can find the hub through its cluster (a Ray worker or
        driver: see :mod:`raydebug.agent.link.discovery`).
        """
        hub = environ.get("RAYDEBUG_HUB", "").strip()
        variable = "RAYDEBUG_HUB"
        if not hub and in_cluster:
            return cls(hub_host=None, hub_port=0, token="",
                       wait_timeout=_wait_timeout(environ),
                       post_mortem=is_on(environ.get("RAYDEBUG_POST_MORTEM")))
        token = _token(environ)
        cert = environ.get("RAYDEBUG_HUB_CERT", "").strip()
        if not hub:  # a process started by a Ray task: its worker found the hub for it
            hub, variable = environ.get("RAYDEBUG_CLUSTER_HUB", "").strip(), "RAYDEBUG_CLUSTER_HUB"
        if not hub:
            from .. import state_file  # not at import: pathlib, for this case only

            local = state_file.read()  # a hub started on this machine by this user
            if local is not None:
                hub = str(local["worker"])
                token = environ.get("RAYDEBUG_TOKEN") or str(local["token"])
                cert = cert or str(local.get("cert") or "")
        if not hub:
            raise ConfigurationError(
                "RAYDEBUG_HUB is not set and no hub runs on this machine: start "
                "`raydebug hub`, or set RAYDEBUG_HUB=host:port and RAYDEBUG_TOKEN as it prints"
            )
        host, port = parse_address(hub, variable)
        if not token:
            raise ConfigurationError(
                "RAYDEBUG_TOKEN is not set: use the token `raydebug hub` prints")
        return cls(
            hub_host=host,
            hub_port=port,
            token=token,
            wait_timeout=_wait_timeout(environ),
            post_mortem=is_on(environ.get("RAYDEBUG_POST_MORTEM")),
            hub_cert=_pin(cert) if cert else None,
        )


def _token(environ: Mapping[str, str]) -> str:
    """``RAYDEBUG_TOKEN``, else the contents of ``RAYDEBUG_TOKEN_FILE``, else ``""``."""
    token = environ.get("RAYDEBUG_TOKEN", "")
    path = environ.get("RAYDEBUG_TOKEN_FILE", "").strip()
    if token or not path:
        return token
    try:
        with open(path, encoding="utf-8") as handle:
            token = handle.read().strip()
    except OSError as error:
        raise ConfigurationError(
            f"RAYDEBUG_TOKEN_FILE={path!r} cannot be read ({error.strerror})") from None
    if not token:
        raise ConfigurationError(f"RAYDEBUG_TOKEN_FILE={path!r} is empty")
    return token


def parse_address(text: str, what: str) -> tuple[str, int]:
    """Split ``host:port`` (``[v6]:port`` too); raises :class:`ConfigurationError`."""
    host, colon, port = text.rpartition(":")
    host = host.strip("[]")
    if not colon or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ConfigurationError(f"{what}={text!r} is not host:port")
    return host, int(port)


def _pin(text: str) -> str:
    from ..tls import parse_pin  # ssl is imported only by processes that use TLS

    return parse_pin(text, "RAYDEBUG_HUB_CERT")


def _wait_timeout(environ: Mapping[str, str]) -> float | None:
    text = environ.get("RAYDEBUG_WAIT_TIMEOUT", "").strip()
    if not text:
        return CI_WAIT_TIMEOUT if environ.get("CI") else None
    try:
        value = float(text)
    except ValueError:
        raise ConfigurationError(
            f"RAYDEBUG_WAIT_TIMEOUT={text!r} is not a number of seconds") from None
    return None if value <= 0 else value


# Variables launchers set to tell processes apart (torchrun, SLURM): each is a label.
LABEL_VARIABLES = ("RANK", "LOCAL_RANK", "WORLD_SIZE", "GROUP_RANK", "SLURM_PROCID")
LABEL_PREFIX = "RAYDEBUG_LABEL_"


def process_labels(environ: Mapping[str, str] = os.environ) -> dict[str, str]:
    """The process's labels: each of :data:`LABEL_VARIABLES` that is set, the items of
    ``RAYDEBUG_LABELS``, and ``RAYDEBUG_LABEL_<KEY>=value`` as ``KEY``; a later source wins
    a key the earlier ones have. A key is spelled as it was set (``RANK``, not ``rank``):
    the name a user sets is the one ``ps``, ``list``, selectors and conditions show and take
    (selectors match keys without regard to case)."""
    labels = {name: environ[name] for name in LABEL_VARIABLES if name in environ}
    labels.update(parse_labels(environ.get("RAYDEBUG_LABELS", "")))
    for name, value in environ.items():
        if name.startswith(LABEL_PREFIX) and len(name) > len(LABEL_PREFIX):
            labels[name[len(LABEL_PREFIX):]] = value
    return labels


def parse_labels(text: str) -> dict[str, str]:
    """``"a=1,b=2"`` -> ``{"a": "1", "b": "2"}``; items without ``=`` are ignored."""
    labels = {}
    for item in text.split(","):
        key, equals, value = item.partition("=")
        if equals and key.strip():
            labels[key.strip()] = value.strip()
    return labels
