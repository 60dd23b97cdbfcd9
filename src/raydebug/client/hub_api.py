"""Blocking access to the hub's HTTP API (for the CLI: one request, then exit)."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from typing import Any

from ..errors import RemoteProtocolError, hub_unreachable

DEFAULT_HUB = "127.0.0.1:5678"


def get_json(hub: str, path: str, timeout: float = 10.0, token: str | None = None) -> Any:
    """GET ``path`` from the hub at ``host:port``; raises :class:`HubUnreachableError` (no
    answer) or :class:`RemoteProtocolError` (an HTTP error, or an answer that is not JSON)."""
    url = f"http://{hub}{path}"
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    try:
        with urllib.request.urlopen(urllib.request.Request(url, headers=headers),
                                    timeout=timeout) as response:
            return json.loads(response.read())
    except urllib.error.HTTPError as error:
        try:
            detail = json.loads(error.read()).get("error", "")
        except ValueError:
            detail = ""
        raise RemoteProtocolError(f"{url}: HTTP {error.code} {detail}".strip()) from None
    except (urllib.error.URLError, OSError) as error:
        raise hub_unreachable(hub, error, saying="no hub at") from None
    except ValueError as error:
        raise RemoteProtocolError(f"{url} did not answer JSON: {error}") from None


def post_json(hub: str, path: str, body: Any, timeout: float = 10.0,
              token: str | None = None) -> Any:
    """POST ``body`` as JSON to ``path``; raises as :func:`get_json` does (an HTTP error's
    message is the hub's ``error``)."""
    url = f"http://{hub}{path}"
    headers = {"Content-Type": "application/json",
               **({"Authorization": f"Bearer {token}"} if token else {})}
    request = urllib.request.Request(url, data=json.dumps(body).encode(), headers=headers,
                                     method="POST")
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return json.loads(response.read())
    except urllib.error.HTTPError as error:
        try:
            detail = json.loads(error.read()).get("error", "")
        except ValueError:
            detail = ""
        raise RemoteProtocolError(f"{url}: HTTP {error.code} {detail}".strip()) from None
    except (urllib.error.URLError, OSError) as error:
        raise hub_unreachable(hub, error, saying="no hub at") from None
    except ValueError as error:
        raise RemoteProtocolError(f"{url} did not answer JSON: {error}") from None


def list_sessions(hub: str, wait_for: int = 0, timeout: float = 0.0,
                  token: str | None = None) -> list[dict[str, Any]]:
    """The hub's sessions; with ``wait_for`` N, first wait up to ``timeout`` s until N exist."""
    path = "/api/sessions"
    if wait_for > 0 and timeout > 0:
        path += f"?min={wait_for}&timeout={timeout:g}"
    sessions = get_json(hub, path, timeout=timeout + 10.0, token=token)
    if not isinstance(sessions, list):
        raise RemoteProtocolError(f"unexpected answer from {hub}/api/sessions")
    return sessions
