"""The hub's HTTP side, on the same port as DAP: a small read-only JSON API.

``GET /api/sessions``  every session (see :class:`raydebug.session.PausedThread`) + ``state``;
                       ``?min=N&timeout=S`` waits up to S seconds until N sessions exist,
                       ``?max=N&timeout=S`` until at most N do; ``&state=waiting``
                       (or ``attached``) counts and lists only those
``GET /api/health``    ``{"status": "ok", ...statistics}``
``GET /api/processes``, ``GET /api/stacks``, ``POST /api/pause``: see ``Hub._routes``

One request per connection (``Connection: close``); requests are bounded in size and time.

DNS rebinding: a web page whose name an attacker points at 127.0.0.1 can make the user's
browser send requests here and read the answers, as the page's own origin. Its requests
still carry the page's name in ``Host``, so only requests whose ``Host`` names the hub (see
:class:`HubNames`) are served; others get 421, a request with an ``Origin`` of another
site 403, and an HTTP/1.1 request without ``Host`` 400 (HTTP/1.0 may omit it).
"""

from __future__ import annotations

import asyncio
import hmac
import ipaddress
import json
import logging
import socket
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from http import HTTPStatus
from typing import Any
from urllib.parse import parse_qsl, urlsplit

from ..errors import ClientRefusedError
from .net import peer_name

log = logging.getLogger("raydebug.hub")

MAX_REQUEST_HEAD = 16 * 1024
HEAD_TIMEOUT = 10.0
_WILDCARDS = ("", "0.0.0.0", "::")

Query = dict[str, str]
Routes = dict[str, Callable[[Query], Awaitable[Any]]]


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


def _headers(head: bytes) -> list[tuple[str, str]]:
    """(lowercased name, value) of each header line, in order."""
    headers = []
    for line in head.split(b"\r\n")[1:]:
        name, colon, value = line.partition(b":")
        if colon:
            headers.append((name.strip().lower().decode("latin-1"),
                            value.strip().decode("latin-1")))
    return headers


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


async def serve_http(first_bytes: bytes, reader: asyncio.StreamReader,
                     writer: asyncio.StreamWriter, routes: Routes,
                     token: str | None = None, *, names: HubNames | None = None,
                     refusal: ClientRefusedError | None = None,
                     post_routes: dict[str, Callable[[Any], Awaitable[Any]]] | None = None,
                     ) -> None:
    """Answer one HTTP request whose first bytes were already read.

    With ``token``, the request must carry ``Authorization: Bearer <token>``. ``names``
    (by default those of a hub on 127.0.0.1) are the ``Host`` values served. With
    ``refusal`` (a client the hub does not serve), the request is read and answered with
    its status and reason. Refusals are logged with the peer's address.
    """
    head = bytearray(first_bytes)
    try:
        await asyncio.wait_for(_read_head(reader, head), HEAD_TIMEOUT)
    except TimeoutError:
        respond(writer, HTTPStatus.REQUEST_TIMEOUT, {"error": "request head not received"})
        return
    except ValueError as error:
        respond(writer, HTTPStatus.BAD_REQUEST, {"error": str(error)})
        return
    request_line = bytes(head).split(b"\r\n", 1)[0].decode("latin-1")
    parts = request_line.split()
    if len(parts) != 3 or not parts[2].startswith("HTTP/"):
        respond(writer, HTTPStatus.BAD_REQUEST, {"error": "malformed request line"})
        return
    method, target, version = parts
    path, _, query_text = target.partition("?")
    route = routes.get(path)
    post = (post_routes or {}).get(path) if method == "POST" else None
    headers = _headers(bytes(head))
    wrong = misdirected(version, headers, names or HubNames())
    if refusal is not None:
        respond(writer, HTTPStatus(refusal.status), {"error": str(refusal)})
    elif wrong is not None:
        status, reason = wrong
        log.warning("client %s: refused: %s", peer_name(writer), reason)
        respond(writer, status, {"error": reason})
    elif token is not None and not _authorized(headers, token):
        respond(writer, HTTPStatus.UNAUTHORIZED, {
            "error": "this hub requires its client token: send 'Authorization: Bearer "
                     "<token>' (raydebug commands: --client-token or RAYDEBUG_CLIENT_TOKEN)"})
    elif post is not None:
        await _serve_post(reader, writer, head, post)
    elif route is None and path in (post_routes or {}):
        respond(writer, HTTPStatus.METHOD_NOT_ALLOWED, {"error": f"{path} takes POST only"})
    elif route is None:
        respond(writer, HTTPStatus.NOT_FOUND,
                 {"error": f"no such resource {path!r}", "resources": sorted(routes)})
    elif method not in ("GET", "HEAD"):
        respond(writer, HTTPStatus.METHOD_NOT_ALLOWED, {"error": f"{method} is not supported"})
    else:
        try:
            payload = await route(dict(parse_qsl(query_text)))
        except ValueError as error:
            respond(writer, HTTPStatus.BAD_REQUEST,
                    {"error": str(error), **getattr(error, "details", {})})
        else:
            respond(writer, HTTPStatus.OK, payload, head_only=method == "HEAD")
    await writer.drain()


MAX_REQUEST_BODY = 64 * 1024


async def _serve_post(reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                      head: bytearray, route: Callable[[Any], Awaitable[Any]]) -> None:
    """Read a POST's JSON body (``Content-Length``, at most MAX_REQUEST_BODY bytes) and
    answer with what ``route(body)`` returns; 400 for a bad body or a ValueError."""
    headers = dict(_headers(bytes(head).split(b"\r\n\r\n", 1)[0]))
    length = headers.get("content-length", "")
    if not length.isdigit() or int(length) > MAX_REQUEST_BODY:
        respond(writer, HTTPStatus.BAD_REQUEST,
                {"error": f"a POST needs a Content-Length of at most {MAX_REQUEST_BODY}"})
        return
    body = bytes(head).split(b"\r\n\r\n", 1)[1]
    try:
        if len(body) < int(length):
            body += await asyncio.wait_for(reader.readexactly(int(length) - len(body)),
                                           HEAD_TIMEOUT)
        payload = await route(json.loads(body[:int(length)] or b"null"))
    except (TimeoutError, asyncio.IncompleteReadError):
        respond(writer, HTTPStatus.BAD_REQUEST, {"error": "request body not received"})
    except ValueError as error:  # json's errors included
        respond(writer, HTTPStatus.BAD_REQUEST,
                {"error": str(error), **getattr(error, "details", {})})
    else:
        respond(writer, HTTPStatus.OK, payload)


def _authorized(headers: list[tuple[str, str]], token: str) -> bool:
    for name, value in headers:
        if name == "authorization":
            scheme, _, given = value.partition(" ")
            return scheme.lower() == "bearer" and hmac.compare_digest(
                given.strip().encode("latin-1"), token.encode())
    return False


async def _read_head(reader: asyncio.StreamReader, head: bytearray) -> None:
    while b"\r\n\r\n" not in head:
        if len(head) > MAX_REQUEST_HEAD:
            raise ValueError(f"request head larger than {MAX_REQUEST_HEAD} bytes")
        data = await reader.read(4096)
        if not data:
            raise ValueError("connection closed before the end of the request head")
        head += data


def respond(writer: asyncio.StreamWriter, status: HTTPStatus, payload: Any,
             head_only: bool = False) -> None:
    body = json.dumps(payload).encode()
    writer.write(
        f"HTTP/1.1 {status.value} {status.phrase}\r\n"
        "Content-Type: application/json\r\n"
        f"Content-Length: {len(body)}\r\n"
        "Cache-Control: no-store\r\n"
        "Connection: close\r\n\r\n".encode()
        + (b"" if head_only else body)
    )
