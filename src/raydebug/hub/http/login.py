"""The client token over HTTP: how a request proves it, and how the page keeps it.

A request proves the token with ``Authorization: Bearer <token>`` or with the cookie
:data:`TOKEN_COOKIE` (HttpOnly, SameSite=Strict: the page's scripts cannot read it, another
site's page never sends it). ``POST /api/login`` sets that cookie (:func:`login`), and so
does ``GET /?token=`` (the page-file route, which redirects to ``/`` so the token leaves
the address bar).
"""

from __future__ import annotations

import hmac
from http import HTTPStatus
from http.cookies import CookieError, SimpleCookie

import h11

from .exchange import HttpExchange, HttpRequest

TOKEN_COOKIE = "raydebug_token"
LOGIN = ("POST", "/api/login")


def is_client_token(given: str, token: str) -> bool:
    """Whether ``given`` is ``token`` (compared in constant time)."""
    return hmac.compare_digest(given.encode("utf-8", "replace"), token.encode())


def presents(request: HttpRequest, token: str) -> bool:
    """Whether ``request`` carries ``token``: as a bearer token, or in the cookie."""
    authorization = request.header("authorization")
    if authorization is not None:
        scheme, _, given = authorization.partition(" ")
        return scheme.lower() == "bearer" and is_client_token(given.strip(), token)
    for name, value in request.headers:
        if name == "cookie":
            try:
                cookies: SimpleCookie = SimpleCookie(value)
            except CookieError:
                continue
            if TOKEN_COOKIE in cookies and is_client_token(cookies[TOKEN_COOKIE].value, token):
                return True
    return False


def token_cookie(token: str) -> tuple[str, str]:
    """The ``Set-Cookie`` header that keeps the client token for the page's later requests
    (unreadable by scripts, never sent from another site's page)."""
    return ("Set-Cookie", f"{TOKEN_COOKIE}={token}; HttpOnly; SameSite=Strict; Path=/")


async def login(exchange: HttpExchange, token: str | None) -> None:
    """Answer ``POST /api/login`` ``{"token": ...}``: the page's way to keep the client
    token in a cookie its scripts cannot read. 200 with ``token_required`` (and the cookie,
    when the token is right), 401 for a wrong token, 400 for a body that is not JSON."""
    try:
        body = await exchange.read_json_body()
    except (TimeoutError, ValueError, h11.RemoteProtocolError) as error:
        exchange.answer(HTTPStatus.BAD_REQUEST, {"error": str(error) or "no body"})
        return
    given = body.get("token") if isinstance(body, dict) else None
    if token is None:
        exchange.answer(HTTPStatus.OK, {"token_required": False})
    elif isinstance(given, str) and is_client_token(given, token):
        exchange.answer(HTTPStatus.OK, {"token_required": True},
                        headers=(token_cookie(token),))
    else:
        exchange.answer(HTTPStatus.UNAUTHORIZED, {"error": "wrong client token"})
