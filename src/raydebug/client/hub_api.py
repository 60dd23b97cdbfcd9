"""Blocking access to the hub's HTTP API (for the CLI: one request, then exit).

One request per connection, over a plain socket: the hub answers ``Connection: close``
with a ``Content-Length`` (see ``hub/http/exchange.py``), so a few lines read it, and a command
does not import urllib.request (http.client, email, ssl: ~40 ms of a command's start).
"""

from __future__ import annotations

import json
import socket
from collections.abc import Sequence
from typing import Any

from ..errors import (
    ClientTokenError,
    ConfigurationError,
    HubUnreachableError,
    NoProcessMatchError,
    RemoteProtocolError,
    hub_unreachable,
)

DEFAULT_HUB = "127.0.0.1:5678"
UNAUTHORIZED = 401  # HTTP's status for a missing or wrong token (no http import for it)


def get_json(hub: str, path: str, timeout: float = 10.0, token: str | None = None) -> Any:
    """GET ``path`` from the hub at ``host:port``; raises :class:`HubUnreachableError` (no
    answer) or :class:`RemoteProtocolError` (an HTTP error, or an answer that is not JSON);
    :class:`NoProcessMatchError` for a selector that matched no process,
    :class:`ClientTokenError` when the hub wants its client token."""
    return request_json(hub, path, timeout=timeout, token=token)


def post_json(hub: str, path: str, body: Any, timeout: float = 10.0,
              token: str | None = None) -> Any:
    """POST ``body`` as JSON to ``path``; the answer and errors as :func:`get_json`'s."""
    return request_json(hub, path, body, timeout=timeout, token=token)


def request_json(hub: str, path: str, body: Any = None, timeout: float = 10.0,
                 token: str | None = None) -> Any:
    """One request to the hub's HTTP API: a GET, or with ``body`` a POST of it as JSON.
    Returns the decoded JSON answer (see :func:`get_json` for what it raises)."""
    raw = request_raw(hub, path, body, timeout, token)
    try:
        return json.loads(raw)
    except ValueError:
        raise not_a_hub(hub, f"it answered {path} with something other than JSON") from None


def request_raw(hub: str, path: str, body: Any = None, timeout: float = 10.0,
                token: str | None = None) -> bytes:
    """As :func:`request_json`, but the answer's bytes as the hub sent them (not decoded:
    a command that only passes them on saves decoding megabytes)."""
    url = f"http://{hub}{path}"
    headers = [f"Host: {hub}", "Connection: close", "Accept: application/json"]
    if token:
        headers.append(f"Authorization: Bearer {token}")
    data = b""
    if body is not None:
        data = json.dumps(body).encode()
        headers += ["Content-Type: application/json", f"Content-Length: {len(data)}"]
    method = "GET" if body is None else "POST"
    head = f"{method} {path} HTTP/1.1\r\n" + "".join(f"{h}\r\n" for h in headers) + "\r\n"
    try:
        status, answer = _exchange(hub, head.encode("latin-1") + data, timeout)
    except TimeoutError:  # socket.timeout: no connection or no answer in time (not "no hub")
        raise HubUnreachableError(
            f"the hub at {hub} did not answer within {timeout:g} s (its process may be "
            "stopped, or too busy to answer)", address=hub) from None
    except OSError as error:  # refused, reset
        raise hub_unreachable(hub, error, saying="no hub at") from None
    if status is None:
        raise not_a_hub(hub, "it does not answer HTTP (a hub's agent port?)",
                        "a raydebug hub's client port")
    if status >= 400:
        try:
            decoded = json.loads(answer)
        except ValueError:
            decoded = None
        if not isinstance(decoded, dict) or "error" not in decoded:  # the hub's always have
            raise not_a_hub(hub, f"it answered {path} with HTTP {status}")
        detail = str(decoded.get("error", ""))
        if status == 400 and isinstance(decoded.get("known"), list):
            raise NoProcessMatchError(detail or f"{url}: nothing matches",
                                      list(decoded["known"]))
        if status == UNAUTHORIZED:  # the token: the user's to act on, in words
            raise ClientTokenError(f"the hub at {hub}: {detail}")
        raise RemoteProtocolError(f"{url}: HTTP {status} {detail}".strip())
    return answer


def not_a_hub(hub: str, why: str, what: str = "a raydebug hub") -> RemoteProtocolError:
    """The error for an answer no raydebug hub's client port gives (``why``), on one line,
    with where to find that port: a Ray cluster's hub was started by no `raydebug hub`."""
    return RemoteProtocolError(f"{hub} is not {what}: {why}; give the hub's client port "
                               "(`raydebug hub-address` on its machine prints it)")


def _exchange(hub: str, request: bytes, timeout: float) -> tuple[int | None, bytes]:
    """Send ``request`` to ``host:port`` and read the whole answer: its status (None when
    it is not HTTP) and body. ``timeout`` bounds each step, as urllib's does."""
    host, _, port = hub.rpartition(":")
    if not port.isdigit():
        raise ConfigurationError(f"{hub!r} is not a hub address: give HOST:PORT")
    name: Any = host.strip("[]")
    if name.isascii():  # as bytes: a str host imports the idna codec (~2 ms of a start)
        name = name.encode()
    with socket.create_connection((name, int(port)), timeout=timeout) as sock:
        sock.sendall(request)
        chunks = []
        while chunk := sock.recv(1 << 20):
            chunks.append(chunk)
    answer = b"".join(chunks)
    head, _, content = answer.partition(b"\r\n\r\n")
    status_line, *header_lines = head.decode("latin-1").split("\r\n")
    words = status_line.split(" ", 2)
    if len(words) < 2 or not words[0].startswith("HTTP/") or not words[1].isdigit():
        return None, b""
    for line in header_lines:
        name, _, value = line.partition(":")
        if name.strip().lower() == "content-length" and value.strip().isdigit():
            content = content[:int(value)]
    return int(words[1]), content


def list_sessions(hub: str, wait_for: int = 0, timeout: float = 0.0,
                  token: str | None = None) -> list[dict[str, Any]]:
    """The hub's sessions; with ``wait_for`` N, first wait up to ``timeout`` s until N exist."""
    sessions = get_json(hub, sessions_path(wait_for, timeout), timeout=timeout + 10.0,
                        token=token)
    if not isinstance(sessions, list):
        raise RemoteProtocolError(f"unexpected answer from {hub}/api/sessions")
    return sessions


def sessions_path(wait_for: int = 0, timeout: float = 0.0) -> str:
    """The path of :func:`list_sessions`' question (for :func:`request_raw`)."""
    if wait_for > 0 and timeout > 0:
        return f"/api/sessions?min={wait_for}&timeout={timeout:g}"
    return "/api/sessions"


def selector_query(selector: Sequence[str], **extra: str) -> str:
    """``?rank=1&host=a&locals=1``: the selector's ``KEY=VALUE`` terms, then ``extra``, as
    the hub's ``/api/processes`` and ``/api/stacks`` take them ("" when there is nothing)."""
    pairs = [(key, value) for key, _, value in (term.partition("=") for term in selector)]
    pairs.extend(extra.items())
    if not pairs:
        return ""
    import urllib.parse  # (with ipaddress: ~4 ms of a command's start) when there are terms

    return "?" + urllib.parse.urlencode(pairs)


def processes(hub: str, selector: Sequence[str] = (), token: str | None = None,
              timeout: float = 10.0, now: bool = True,
              full_argv: bool = False) -> list[dict[str, Any]]:
    """The hub's live processes (the contract's process records) that ``selector``
    matches (none: an empty list). ``now``: the hub asks the Ray processes what they run
    now (``task_name``); without, it answers from what it has."""
    answer = get_json(hub, processes_path(selector, now, full_argv), timeout, token)
    if not isinstance(answer, list):
        raise RemoteProtocolError(f"unexpected answer from {hub}/api/processes")
    return answer


def processes_path(selector: Sequence[str] = (), now: bool = True,
                   full_argv: bool = False) -> str:
    """The path of :func:`processes`' question (for :func:`request_raw`); ``full_argv``:
    each ``argv`` whole (the hub bounds it in a listing)."""
    extra = ({} if now else {"now": "0"}) | ({"argv": "1"} if full_argv else {})
    return "/api/processes" + selector_query(selector, **extra)


def stacks(hub: str, selector: Sequence[str] = (), with_locals: bool = False,
           timeout: float = 2.0, token: str | None = None) -> dict[str, Any]:
    """Every thread's stack in every selected process, collected without pausing them; a
    process that does not answer within ``timeout`` s is in the answer with its reason."""
    extra = {"timeout": f"{timeout:g}"}
    if with_locals:
        extra["locals"] = "1"
    answer = get_json(hub, "/api/stacks" + selector_query(selector, **extra),
                      timeout + 10.0, token)
    if not isinstance(answer, dict) or not isinstance(answer.get("processes"), list):
        raise RemoteProtocolError(f"unexpected answer from {hub}/api/stacks")
    return answer


def pause(hub: str, selector: Sequence[str], token: str | None = None,
          timeout: float = 15.0, expire: float = 0.0, cancel: bool = False) -> dict[str, Any]:
    """Pause every running process that ``selector`` matches: ``{"paused": [ids],
    "already_paused": [ids], "failed": {id: reason}}``; their sessions (reason ``pause``)
    appear soon after, and a thread not stopped within ``expire`` seconds is no longer
    asked (0: until it stops or is cancelled). ``cancel``: withdraw those processes'
    pauses not met yet instead: ``{"cancelled": {id: threads}, "failed": {id: reason}}``.
    Raises :class:`NoProcessMatchError` when none matches."""
    body: dict[str, Any] = {"selector": list(selector)}
    if cancel:
        body["cancel"] = True
    elif expire:
        body["expire"] = expire
    answer = post_json(hub, "/api/pause", body, timeout, token)
    if not isinstance(answer, dict):
        raise RemoteProtocolError(f"unexpected answer from {hub}/api/pause")
    return answer


def continue_sessions(hub: str, selector: Sequence[str], token: str | None = None,
                      timeout: float = 15.0) -> dict[str, Any]:
    """Let every paused thread of the processes ``selector`` matches run on: ``{"resumed":
    [session], "not_resumed": [session with "reason"]}`` (a process a client is attached
    to is left to it). Raises :class:`NoProcessMatchError` when no process matches."""
    answer = post_json(hub, "/api/continue", {"selector": list(selector)}, timeout, token)
    if not isinstance(answer, dict) or not isinstance(answer.get("resumed"), list):
        raise RemoteProtocolError(f"unexpected answer from {hub}/api/continue")
    return answer


def list_snapshots(hub: str, selector: Sequence[str] = (),
                   token: str | None = None) -> list[dict[str, Any]]:
    """The snapshots the hub keeps (of processes matching ``selector``), newest first."""
    answer = get_json(hub, "/api/snapshots" + selector_query(selector), token=token)
    rows = answer.get("snapshots") if isinstance(answer, dict) else None
    if not isinstance(rows, list):
        raise not_a_hub(hub, "it answered /api/snapshots with no list")
    return rows


def clear_snapshots(hub: str, selector: Sequence[str] = (),
                    token: str | None = None) -> list[str]:
    """Drop the snapshots of processes matching ``selector`` (all, without one); the ids
    dropped."""
    answer = post_json(hub, "/api/snapshots/clear", {"selector": list(selector)}, token=token)
    removed = answer.get("removed") if isinstance(answer, dict) else None
    if not isinstance(removed, list):
        raise not_a_hub(hub, "it answered /api/snapshots/clear with no list")
    return [str(snapshot_id) for snapshot_id in removed]
