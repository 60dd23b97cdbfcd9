"""The hub's HTTP side, on the same port as DAP: a small read-only JSON API.

``GET /api/sessions``  every session (see :class:`raydebug.session.SessionRecord`) + ``state``;
                       ``?min=N&timeout=S`` waits up to S seconds until N sessions exist,
                       ``?max=N&timeout=S`` until at most N do; ``&state=waiting``
                       (or ``attached``) counts and lists only those
``GET /api/health``    ``{"status": "ok", ...statistics}``

One request per connection (``Connection: close``); requests are bounded in size and time.
"""

from __future__ import annotations

import asyncio
import hmac
import json
from collections.abc import Awaitable, Callable
from http import HTTPStatus
from typing import Any
from urllib.parse import parse_qsl

MAX_REQUEST_HEAD = 16 * 1024
HEAD_TIMEOUT = 10.0

Query = dict[str, str]
Routes = dict[str, Callable[[Query], Awaitable[Any]]]


async def serve_http(first_bytes: bytes, reader: asyncio.StreamReader,
                     writer: asyncio.StreamWriter, routes: Routes,
                     token: str | None = None) -> None:
    """Answer one HTTP request whose first bytes were already read.

    With ``token``, the request must carry ``Authorization: Bearer <token>``.
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
    method, target, _version = parts
    path, _, query_text = target.partition("?")
    route = routes.get(path)
    if token is not None and not _authorized(bytes(head), token):
        respond(writer, HTTPStatus.UNAUTHORIZED, {
            "error": "this hub requires its client token: send 'Authorization: Bearer "
                     "<token>' (raydebug commands: --client-token or RAYDEBUG_CLIENT_TOKEN)"})
    elif route is None:
        respond(writer, HTTPStatus.NOT_FOUND,
                 {"error": f"no such resource {path!r}", "resources": sorted(routes)})
    elif method not in ("GET", "HEAD"):
        respond(writer, HTTPStatus.METHOD_NOT_ALLOWED, {"error": f"{method} is not supported"})
    else:
        try:
            payload = await route(dict(parse_qsl(query_text)))
        except ValueError as error:
            respond(writer, HTTPStatus.BAD_REQUEST, {"error": str(error)})
        else:
            respond(writer, HTTPStatus.OK, payload, head_only=method == "HEAD")
    await writer.drain()


def _authorized(head: bytes, token: str) -> bool:
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"authorization":
            scheme, _, given = value.strip().partition(b" ")
            return scheme.lower() == b"bearer" and hmac.compare_digest(
                given.strip(), token.encode())
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
