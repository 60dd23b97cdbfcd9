"""Whether a request is meant for this hub: its ``Host`` and ``Origin`` (DNS rebinding).

A web page whose name an attacker points at 127.0.0.1 can make the user's browser send
requests here and read the answers, as the page's own origin. Its requests still carry the
page's name in ``Host``, so only requests whose ``Host`` names the hub (see
:class:`HubNames`) are served; others get 421, a request with an ``Origin`` of another site
403, and an HTTP/1.1 request without ``Host`` 400 (HTTP/1.0 may omit it).
"""

from __future__ import annotations

import ipaddress
import socket
from dataclasses import dataclass, field
from http import HTTPStatus
from urllib.parse import urlsplit

_WILDCARDS = ("", "0.0.0.0", "::")


@dataclass(frozen=True)
class HubNames:
    """The names by which an HTTP request may address the hub (any port): ``localhost``,
    loopback addresses, and the address the client listener is bound to. A listener bound
    to every address also answers to any address literal (DNS rebinding needs a name) and
    to this machine's host name."""

    bound: str = "127.0.0.1"
    hostname: str = field(default_factory=lambda: socket.gethostname().lower())

    def names_hub(self, authority: str) -> bool:
        """Whether ``authority`` (a ``Host`` value: ``host[:port]``, ``[v6][:port]``) is
        one of the hub's names."""
        host = _host_of(authority)
        if host is None:
            return False
        if host == "localhost":
            return True
        wildcard = self.bound.lower() in _WILDCARDS
        try:
            address = ipaddress.ip_address(host)
        except ValueError:
            return host == self.bound.lower() or (wildcard and host == self.hostname)
        if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
            address = address.ipv4_mapped
        if address.is_loopback or wildcard:
            return True
        try:
            return address == ipaddress.ip_address(self.bound)
        except ValueError:
            return False


def _host_of(authority: str) -> str | None:
    """The host part of ``host[:port]`` or ``[v6][:port]``, lowercased; None if malformed."""
    value = authority.strip().lower()
    if value.startswith("["):
        host, bracket, port = value[1:].partition("]")
        if not bracket or (port and not (port[0] == ":" and port[1:].isdigit())):
            return None
        return host
    host, colon, port = value.partition(":")
    if not host or (colon and not port.isdigit()):
        return None
    return host.rstrip(".")  # "localhost." is localhost


def misdirected(version: str, headers: list[tuple[str, str]],
                names: HubNames) -> tuple[HTTPStatus, str] | None:
    """Why a request is not for this hub (status and reason), or None when it is."""
    hosts = [value for name, value in headers if name == "host"]
    if len(hosts) > 1:
        return HTTPStatus.BAD_REQUEST, "more than one Host header"
    if not hosts:
        if version == "HTTP/1.0":
            return None
        return HTTPStatus.BAD_REQUEST, "an HTTP/1.1 request needs a Host header"
    if not names.names_hub(hosts[0]):
        return HTTPStatus.MISDIRECTED_REQUEST, (
            f"this hub does not answer to Host {hosts[0]!r} (DNS rebinding protection): "
            "address it as 127.0.0.1, localhost or the address it listens on")
    for name, origin in headers:
        if name == "origin" and not names.names_hub(urlsplit(origin).netloc or "-"):
            return HTTPStatus.FORBIDDEN, f"requests from the web page {origin!r} are not served"
    return None
