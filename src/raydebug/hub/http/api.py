"""The hub's HTTP side, on the same port as DAP: a JSON API, the web page, a WebSocket.

The bytes are h11's (a sans-IO HTTP/1.1 parser, like ``protocol/``); this module only
decides what each request gets. One request per connection (``Connection: close``);
the head is bounded in size (:data:`MAX_REQUEST_HEAD`) and time (:data:`HEAD_TIMEOUT`),
a body in size (:data:`MAX_REQUEST_BODY`) and time too.

The route table (built by the hub, see ``Hub._routes``) maps a key to a handler:

``"/path"``            GET (and HEAD): ``await handler(query) -> payload``
``"POST /path"``       POST with a JSON body: ``await handler(query, body) -> payload``
``"WEBSOCKET /path"``  an upgrade to a WebSocket: ``await handler(reader, writer, proven)``
                       after the handshake (see :mod:`.websocket`); ``proven`` says the
                       upgrade carried the client token

A payload is answered as JSON with status 200, unless the handler returns a :class:`Reply`
(another status, or bytes of another type: the page's files). A handler that raises
ValueError is answered 400 with its text (and the fields of its ``details``, if it has one).

DNS rebinding: a web page whose name an attacker points at 127.0.0.1 can make the user's
browser send requests here and read the answers, as the page's own origin. Its requests
still carry the page's name in ``Host``, so only requests whose ``Host`` names the hub (see
:class:`HubNames`) are served; others get 421, a request with an ``Origin`` of another
site 403, and an HTTP/1.1 request without ``Host`` 400 (HTTP/1.0 may omit it). No CORS
header is ever sent, and every answer carries a strict Content-Security-Policy.

Client token: with one, every route except the page's own files needs
``Authorization: Bearer <token>`` or the cookie :data:`TOKEN_COOKIE` (HttpOnly,
SameSite=Strict), which ``POST /api/login`` and ``GET /?token=`` set (the latter redirects
to ``/``, so the token leaves the address bar).
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
from http.cookies import CookieError, SimpleCookie
from typing import Any
from urllib.parse import parse_qsl, urlsplit

import h11
from wsproto.utilities import generate_accept_token

from ...errors import ClientRefusedError
from ..net import RECV_SIZE, peer_name
from .websocket import Serve, WebSocketSocket

log = logging.getLogger("raydebug.hub")

MAX_REQUEST_HEAD = 16 * 1024
MAX_REQUEST_BODY = 64 * 1024
HEAD_TIMEOUT = 10.0
TOKEN_COOKIE = "raydebug_token"
_WILDCARDS = ("", "0.0.0.0", "::")

# Scripts, styles and connections (fetch and WebSocket: CSP 3 matches ws: to 'self') come
# from the hub only; nothing inline, no frames, no forms elsewhere.
CONTENT_SECURITY_POLICY = ("default-src 'self'; script-src 'self'; style-src 'self'; "
                           "img-src 'self' data:; connect-src 'self'; object-src 'none'; "
                           "base-uri 'none'; frame-ancestors 'none'; form-action 'self'")
SECURITY_HEADERS = (
    ("Content-Security-Policy", CONTENT_SECURITY_POLICY),
    ("X-Content-Type-Options", "nosniff"),
    ("Referrer-Policy", "no-referrer"),
    ("Cache-Control", "no-store"),
)

Query = dict[str, str]
Routes = dict[str, Callable[..., Awaitable[Any]]]


@dataclass(frozen=True)
class Reply:
    """What a route answers when it is not JSON with status 200."""

    status: HTTPStatus = HTTPStatus.OK
    payload: Any = None  # JSON, unless ``body`` is given
    body: bytes | None = None
    content_type: str = "application/json"
    headers: tuple[tuple[str, str], ...] = ()


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


@dataclass(frozen=True)
class HttpRequest:
    """One request's head, decoded: what the checks and the routes look at."""

    method: str
    path: str
    query: Query
    version: str
    headers: list[tuple[str, str]]  # (lowercased name, value), in order

    @classmethod
    def from_h11(cls, event: h11.Request) -> HttpRequest:
        target = event.target.decode("latin-1")
        path, _, query_text = target.partition("?")
        return cls(event.method.decode("latin-1"), path, dict(parse_qsl(query_text)),
                   "HTTP/" + event.http_version.decode("latin-1"),
                   [(name.decode("latin-1").lower(), value.decode("latin-1"))
                    for name, value in event.headers])

    def header(self, name: str) -> str | None:
        return next((value for key, value in self.headers if key == name), None)

    def wants_websocket(self) -> bool:
        upgrade = (self.header("upgrade") or "").lower()
        return upgrade == "websocket" and "upgrade" in (self.header("connection") or "").lower()

    def presents(self, token: str) -> bool:
        """Whether the request carries ``token``: as a bearer token, or in the cookie."""
        authorization = self.header("authorization")
        if authorization is not None:
            scheme, _, given = authorization.partition(" ")
            return scheme.lower() == "bearer" and _same(given.strip(), token)
        for name, value in self.headers:
            if name == "cookie":
                try:
                    cookies: SimpleCookie = SimpleCookie(value)
                except CookieError:
                    continue
                if TOKEN_COOKIE in cookies and _same(cookies[TOKEN_COOKIE].value, token):
                    return True
        return False


def _same(given: str, token: str) -> bool:
    return hmac.compare_digest(given.encode("utf-8", "replace"), token.encode())


def token_cookie(token: str) -> tuple[str, str]:
    """The ``Set-Cookie`` header that keeps the client token for the page's later requests
    (unreadable by scripts, never sent from another site's page)."""
    return ("Set-Cookie", f"{TOKEN_COOKIE}={token}; HttpOnly; SameSite=Strict; Path=/")


class HttpExchange:
    """One HTTP request and its answer over h11 on an asyncio stream."""

    def __init__(self, first_bytes: bytes, reader: asyncio.StreamReader,
                 writer: asyncio.StreamWriter) -> None:
        self.reader = reader
        self.writer = writer
        self.connection = h11.Connection(h11.SERVER, max_incomplete_event_size=MAX_REQUEST_HEAD)
        self.connection.receive_data(first_bytes)

    async def next_event(self) -> Any:
        """The next h11 event other than NEED_DATA (PAUSED after an upgrade request).
        Raises h11.RemoteProtocolError on malformed input or an early end of stream."""
        while True:
            event = self.connection.next_event()
            if event is not h11.NEED_DATA:
                return event
            self.connection.receive_data(await self.reader.read(RECV_SIZE))

    async def read_body(self, limit: int) -> bytes:
        """The request's body, at most ``limit`` bytes; raises ValueError when larger."""
        body = bytearray()
        while True:
            event = await self.next_event()
            if isinstance(event, h11.Data):
                body += event.data
                if len(body) > limit:
                    raise ValueError(f"request body larger than {limit} bytes")
            elif isinstance(event, h11.EndOfMessage):
                return bytes(body)
            else:
                raise ValueError("the request ended before its body")

    def answer(self, status: HTTPStatus, payload: Any = None, *, body: bytes | None = None,
               content_type: str = "application/json", head_only: bool = False,
               headers: tuple[tuple[str, str], ...] = ()) -> None:
        """Write the whole answer (no waiting: the caller drains). A connection whose
        request could not be parsed is answered all the same."""
        data = json.dumps(payload).encode() if body is None else body
        all_headers = [("Content-Type", content_type), ("Content-Length", str(len(data))),
                       ("Connection", "close"), *SECURITY_HEADERS, *headers]
        if self.connection.our_state not in (h11.IDLE, h11.SEND_RESPONSE):
            return  # already answered
        unparsed = self.connection.their_state in (h11.ERROR, h11.IDLE)
        if (unparsed and self.connection.our_state is h11.IDLE) or \
                self.connection.their_state is h11.ERROR:
            # h11 answers only a request it parsed; the head of this one never was.
            self.writer.write(_raw_answer(status, all_headers, b"" if head_only else data))
            return
        self.writer.write(self.connection.send(h11.Response(
            status_code=status.value, reason=status.phrase.encode(), headers=all_headers)))
        if not head_only:
            self.writer.write(self.connection.send(h11.Data(data=data)) or b"")
        self.writer.write(self.connection.send(h11.EndOfMessage()) or b"")


def _raw_answer(status: HTTPStatus, headers: list[tuple[str, str]], body: bytes) -> bytes:
    lines = [f"HTTP/1.1 {status.value} {status.phrase}"]
    lines += [f"{name}: {value}" for name, value in headers]
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body


def respond(writer: asyncio.StreamWriter, status: HTTPStatus, payload: Any) -> None:
    """Answer a request the hub will not read (a refused connection) with ``payload``."""
    body = json.dumps(payload).encode()
    writer.write(_raw_answer(status, [
        ("Content-Type", "application/json"), ("Content-Length", str(len(body))),
        ("Connection", "close"), *SECURITY_HEADERS], body))


async def serve_http(first_bytes: bytes, reader: asyncio.StreamReader,
                     writer: asyncio.StreamWriter, routes: Routes,
                     token: str | None = None, *, names: HubNames | None = None,
                     refusal: ClientRefusedError | None = None,
                     public: Callable[[str], bool] = lambda path: False) -> None:
    """Answer one HTTP request whose first bytes were already read (or serve the
    WebSocket it upgrades to, until it closes).

    With ``token``, the request must present it (see :meth:`HttpRequest.presents`) unless
    ``public(path)`` (the page's own files, which hold no secret). ``names`` (by default
    those of a hub on 127.0.0.1) are the ``Host`` values served. With ``refusal`` (a client
    the hub does not serve), the request is read and answered with its status and reason.
    Refusals are logged with the peer's address.
    """
    exchange = HttpExchange(first_bytes, reader, writer)
    try:
        event = await asyncio.wait_for(exchange.next_event(), HEAD_TIMEOUT)
    except TimeoutError:
        exchange.answer(HTTPStatus.REQUEST_TIMEOUT, {"error": "request head not received"})
        return
    except h11.RemoteProtocolError as error:
        exchange.answer(HTTPStatus(error.error_status_hint),
                        {"error": f"malformed request: {error}"})
        return
    if not isinstance(event, h11.Request):
        exchange.answer(HTTPStatus.BAD_REQUEST, {"error": "malformed request"})
        return
    request = HttpRequest.from_h11(event)
    wrong = misdirected(request.version, request.headers, names or HubNames())
    proven = token is not None and request.presents(token)
    if refusal is not None:
        exchange.answer(HTTPStatus(refusal.status), {"error": str(refusal)})
    elif wrong is not None:
        status, reason = wrong
        log.warning("client %s: refused: %s", peer_name(writer), reason)
        exchange.answer(status, {"error": reason})
    elif token is not None and not proven and not public(request.path) \
            and (request.method, request.path) != ("POST", "/api/login"):
        exchange.answer(HTTPStatus.UNAUTHORIZED, {
            "error": "this hub requires its client token: send 'Authorization: Bearer "
                     "<token>' (raydebug commands: --client-token or RAYDEBUG_CLIENT_TOKEN)"})
    else:
        await _route(exchange, request, routes, token, proven)
    await writer.drain()


async def _route(exchange: HttpExchange, request: HttpRequest, routes: Routes,
                 token: str | None, proven: bool) -> None:
    """Answer an admitted request from ``routes``."""
    method, path = request.method, request.path
    if request.wants_websocket():
        handler = routes.get(f"WEBSOCKET {path}")
        if handler is None or method != "GET":
            exchange.answer(HTTPStatus.NOT_FOUND, {"error": f"no WebSocket at {path!r}"})
            return
        await _upgrade(exchange, request,
                       lambda reader, writer: handler(reader, writer, proven))
        return
    if method == "POST" and path == "/api/login":
        await _login(exchange, token)
        return
    get = routes.get(path)
    post = routes.get(f"POST {path}")
    if get is None and post is None:
        exchange.answer(HTTPStatus.NOT_FOUND, {
            "error": f"no such resource {path!r}",
            "resources": sorted(key for key in routes if key.startswith("/"))})
        return
    try:
        if method in ("GET", "HEAD") and get is not None:
            result = await get(request.query)
        elif method == "POST" and post is not None:
            result = await post(request.query, _json_body(await asyncio.wait_for(
                exchange.read_body(MAX_REQUEST_BODY), HEAD_TIMEOUT)))
        else:
            allowed = "POST" if get is None else "GET"
            exchange.answer(HTTPStatus.METHOD_NOT_ALLOWED,
                            {"error": f"{method} is not supported: {path} takes {allowed}"})
            return
    except TimeoutError:
        exchange.answer(HTTPStatus.REQUEST_TIMEOUT, {"error": "request body not received"})
        return
    except (ValueError, h11.RemoteProtocolError) as error:
        # an error may carry more fields for the answer (a selector's known processes)
        exchange.answer(HTTPStatus.BAD_REQUEST,
                        {"error": str(error), **getattr(error, "details", {})})
        return
    reply = result if isinstance(result, Reply) else Reply(payload=result)
    exchange.answer(reply.status, reply.payload, body=reply.body,
                    content_type=reply.content_type, head_only=method == "HEAD",
                    headers=reply.headers)


async def _upgrade(exchange: HttpExchange, request: HttpRequest, serve: Serve) -> None:
    """Complete the WebSocket upgrade ``request`` (RFC 6455 section 4.2) and run ``serve``
    on the WebSocket's streams until either side ends (see :mod:`.websocket`). A request
    that is not a version-13 upgrade is answered 426, one without a key 400."""
    key = request.header("sec-websocket-key")
    if request.header("sec-websocket-version") != "13":
        exchange.answer(HTTPStatus.UPGRADE_REQUIRED, {"error": "WebSocket version 13 only"},
                        headers=(("Sec-WebSocket-Version", "13"),))
        return
    if not key:
        exchange.answer(HTTPStatus.BAD_REQUEST, {"error": "no Sec-WebSocket-Key"})
        return
    exchange.writer.write(exchange.connection.send(h11.InformationalResponse(
        status_code=101, reason=b"Switching Protocols", headers=[
            ("Upgrade", "websocket"), ("Connection", "Upgrade"),
            ("Sec-WebSocket-Accept", generate_accept_token(key.encode("latin-1")).decode()),
            *SECURITY_HEADERS])))
    trailing, _ = exchange.connection.trailing_data
    await WebSocketSocket(exchange.reader, exchange.writer, trailing).run(serve)


def _json_body(body: bytes) -> Any:
    if not body:
        return None
    try:
        return json.loads(body)
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise ValueError(f"the request body is not JSON: {error}") from None


async def _login(exchange: HttpExchange, token: str | None) -> None:
    """``POST /api/login`` ``{"token": ...}``: the page's way to keep the client token in a
    cookie its scripts cannot read."""
    try:
        body = _json_body(await asyncio.wait_for(exchange.read_body(MAX_REQUEST_BODY),
                                                 HEAD_TIMEOUT))
    except (TimeoutError, ValueError, h11.RemoteProtocolError) as error:
        exchange.answer(HTTPStatus.BAD_REQUEST, {"error": str(error) or "no body"})
        return
    given = body.get("token") if isinstance(body, dict) else None
    if token is None:
        exchange.answer(HTTPStatus.OK, {"token_required": False})
    elif isinstance(given, str) and _same(given, token):
        exchange.answer(HTTPStatus.OK, {"token_required": True},
                        headers=(token_cookie(token),))
    else:
        exchange.answer(HTTPStatus.UNAUTHORIZED, {"error": "wrong client token"})
