"""The WebSocket upgrade (RFC 6455 section 4.2): from an HTTP request to a WebSocket.

h11 reads the upgrade request and writes the ``101 Switching Protocols``; the bytes the
browser sent after its request are handed to :class:`.websocket.WebSocketSocket`, which
serves the WebSocket from then on.
"""

from __future__ import annotations

from http import HTTPStatus

import h11
from wsproto.utilities import generate_accept_token

from .exchange import SECURITY_HEADERS, HttpExchange, HttpRequest
from .websocket import Serve, WebSocketSocket


async def upgrade(exchange: HttpExchange, request: HttpRequest, serve: Serve) -> None:
    """Complete the WebSocket upgrade ``request`` and run ``serve`` on the WebSocket's
    streams until either side ends (see :mod:`.websocket`). A request that is not a
    version-13 upgrade is answered 426, one without a key 400."""
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
