"""Bounded waits on a hub's long-polling listings, for tests and benchmarks.

A listing (``/api/processes``, ``/api/sessions``, ``/api/breakpoints``, ``/api/snapshots``)
names the version it shows in its ``Raydebug-Version`` header and, asked with
``after=VERSION&timeout=S``, answers once what it shows changed after that version or when
``S`` seconds have run out (see the hub's ``raydebug.hub.http.long_poll``). Each poll asks the
hub to wait only as long as the caller's deadline has left *when the poll is sent*, and the
client waits for the answer a little longer than that (:data:`ANSWER_MARGIN`): the hub's
answer always comes before the client gives up on the socket, and a deadline that has
passed gets one last look (``timeout=0``, answered at once) and then the ``TimeoutError``
naming what was waited for, never a socket's "timed out".
"""

from __future__ import annotations

import json
import time
import urllib.request
from collections.abc import Callable
from typing import Any

TIMEOUT = 30.0
# Seconds the client waits for an answer beyond the wait it asked of the hub: the hub answers
# at its bound, and a loaded machine delays the answer by a little.
ANSWER_MARGIN = 10.0


def wait_listing(client_address: str, path: str, what: str, check: Callable[[Any], Any],
                 timeout: float = TIMEOUT) -> Any:
    """Long-poll ``GET path`` (a listing of the hub that has a long-poll) until
    ``check(answer)`` is true, and return its value. Each poll waits for what the listing
    shows to change after the answer it last read, so this wakes on the change that makes it
    true, never on a clock; raise ``TimeoutError`` naming ``what`` after ``timeout``."""
    deadline = time.monotonic() + timeout
    version: str | None = None
    joint = "&" if "?" in path else "?"
    while True:
        remaining = max(deadline - time.monotonic(), 0.0)
        # The hub's wait is what is left now, not when the last answer came: a check that
        # took seconds (a `raydebug list` on a loaded machine) must not leave the hub a
        # longer wait than the client's.
        after = "" if version is None else f"{joint}after={version}&timeout={remaining:.2f}"
        url = f"http://{client_address}{path}{after}"
        with urllib.request.urlopen(url, timeout=remaining + ANSWER_MARGIN) as response:
            answer = json.loads(response.read())
            version = response.headers["Raydebug-Version"]
        value = check(answer)
        if value:
            return value
        if remaining <= 0:
            raise TimeoutError(f"{what}: not within {timeout:.0f} s; the hub's last answer: "
                               f"{json.dumps(answer)[:1000]}")
