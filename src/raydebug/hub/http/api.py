"""One HTTP request on the client port, from its head to its answer: checks, then routes.

The bytes are h11's (:mod:`.exchange`); this module decides what each request gets, in this
order: a client the hub does not serve is answered with its refusal; a request not meant
for this hub (:mod:`.host_check`) 421, 403 or 400; one without the client token, when the
hub has one (:mod:`.login`), 401, unless it asks for the page's own files (which hold no
secret) or logs in; the others are routed.

The route table (the hub's is :meth:`.routes.HubRoutes.table`) maps a key to a handler:

``"/path"``            GET (and HEAD): ``await handler(query) -> payload``
``"POST /path"``       POST with a JSON body: ``await handler(query, body) -> payload``
``"WEBSOCKET /path"``  an upgrade to a WebSocket: ``await handler(reader, writer, proven)``
                       after the handshake (see :mod:`.upgrade`); ``proven`` says the
                       upgrade carried the client token

A payload is answered as JSON with status 200, unless the handler returns a :class:`Reply`
(another status, headers, or bytes of another type: the page's files). A handler that
raises ValueError is answered 400 with its text (and the fields of its ``details``, if it
has one).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from http import HTTPStatus
from typing import Any

import h11

from ...errors import ClientRefusedError
from ..net import peer_name
from .exchange import HEAD_TIMEOUT, HttpExchange, HttpRequest
from .host_check import HubNames, misdirected
from .login import LOGIN, login, presents
from .upgrade import upgrade

log = logging.getLogger("raydebug.hub")

Routes = dict[str, Callable[..., Awaitable[Any]]]


@dataclass(frozen=True)
class Reply:
    """What a route answers when it is not JSON with status 200 and no header of its own."""

    status: HTTPStatus = HTTPStatus.OK
    payload: Any = None  # JSON, unless ``body`` is given
    body: bytes | None = None
    content_type: str = "application/json"
    headers: tuple[tuple[str, str], ...] = ()


async def serve_http(first_bytes: bytes, reader: asyncio.StreamReader,
                     writer: asyncio.StreamWriter, routes: Routes,
                     token: str | None = None, *, names: HubNames | None = None,
                     refusal: ClientRefusedError | None = None,
                     public: Callable[[str], bool] = lambda path: False) -> None:
    """Answer one HTTP request whose first bytes were already read (or serve the
    WebSocket it upgrades to, until it closes).

    With ``token``, the request must present it (see :func:`.login.presents`) unless
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
    proven = token is not None and presents(request, token)
    if refusal is not None:
        exchange.answer(HTTPStatus(refusal.status), {"error": str(refusal)})
    elif wrong is not None:
        status, reason = wrong
        log.warning("client %s: refused: %s", peer_name(writer), reason)
        exchange.answer(status, {"error": reason})
    elif token is not None and not proven and not public(request.path) \
            and (request.method, request.path) != LOGIN:
        exchange.answer(HTTPStatus.UNAUTHORIZED, {"error": _token_refusal(request)})
    else:
        await _route(exchange, request, routes, token, proven)
    await writer.drain()


def _token_refusal(request: HttpRequest) -> str:
    """Why a request without the client token is refused: it sent another one, or none."""
    if request.header("authorization") is not None:
        return ("the client token given is not this hub's (raydebug commands: --client-token "
                "or RAYDEBUG_CLIENT_TOKEN)")
    return ("this hub requires its client token: send 'Authorization: Bearer <token>' "
            "(raydebug commands: --client-token or RAYDEBUG_CLIENT_TOKEN)")


async def _route(exchange: HttpExchange, request: HttpRequest, routes: Routes,
                 token: str | None, proven: bool) -> None:
    """Answer an admitted request from ``routes``."""
    method, path = request.method, request.path
    if request.wants_websocket():
        handler = routes.get(f"WEBSOCKET {path}")
        if handler is None or method != "GET":
            exchange.answer(HTTPStatus.NOT_FOUND, {"error": f"no WebSocket at {path!r}"})
            return
        await upgrade(exchange, request, lambda reader, writer: handler(reader, writer, proven))
        return
    if (method, path) == LOGIN:
        await login(exchange, token)
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
            result = await post(request.query, await exchange.read_json_body())
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
