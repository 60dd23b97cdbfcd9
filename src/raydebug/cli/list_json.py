"""``raydebug list --json``: the hub's sessions on stdout, as the hub sent them.

Scripts and editors run it often, and most of its time is Python's start and imports, a
third of which is click (docs/design.md#per-step-costs). So a command line that names its
hub and asks nothing else, ``raydebug list --json --hub HOST:PORT`` (the hub also by
``RAYDEBUG_CLIENT_ADDRESS``; ``--client-token`` or ``RAYDEBUG_CLIENT_TOKEN`` allowed), is
served here before click is imported (:func:`serve_without_click`, called first by
``raydebug.__main__``). Every other command line goes through click, whose ``list`` prints
through :func:`print_sessions_json` too: one way to print them.
"""

from __future__ import annotations

import os
import sys

from ..client.hub_api import not_a_hub, request_raw, sessions_path
from ..errors import RaydebugError
from .output import error

# The options a line served without click may have besides --json, as `list` spells them,
# with the environment variable click reads for each (an empty one counts as unset, as in
# click).
QUICK_OPTIONS = {"--hub": "RAYDEBUG_CLIENT_ADDRESS", "--client-token": "RAYDEBUG_CLIENT_TOKEN"}


def print_sessions_json(hub: str, wait_for: int = 0, waited: float = 0.0,
                        token: str | None = None) -> bytes:
    """Write the sessions of the hub at ``hub`` to stdout as JSON (one session per line, the
    hub's bytes: decoding and encoding 1,000 sessions again took ~25 ms), having waited up
    to ``waited`` seconds for ``wait_for`` of them; return those bytes. Raises
    :class:`~raydebug.errors.RemoteProtocolError` when the answer is not a list (no hub
    there), and what :func:`~raydebug.client.hub_api.request_raw` raises."""
    raw = request_raw(hub, sessions_path(wait_for, waited), timeout=waited + 10.0, token=token)
    if not raw.startswith(b"["):
        raise not_a_hub(hub, "it answered /api/sessions with no list")
    sys.stdout.buffer.write(raw.rstrip() + b"\n")
    sys.stdout.flush()
    return raw


def quick_arguments(argv: list[str]) -> dict[str, str | None] | None:
    """``{"--hub": ..., "--client-token": ...}`` of a command line (``argv`` without the
    program) that :func:`serve_without_click` serves: ``list --json`` with its hub named and
    no other option but the client token, each as click would read it (``--opt VALUE`` or
    ``--opt=VALUE``, the last one wins, else its environment variable); None for any other
    line (click parses it)."""
    if not argv or argv[0] != "list":
        return None
    given: dict[str, str | None] = {option: os.environ.get(variable) or None
                                    for option, variable in QUICK_OPTIONS.items()}
    as_json = False
    words = iter(argv[1:])
    for word in words:
        if word == "--json":
            as_json = True
            continue
        option, equals, value = word.partition("=")
        if option not in QUICK_OPTIONS:
            return None
        if not equals:
            value = next(words, "")
            if not value or value.startswith("-"):
                return None  # click's to say what is wrong, or to read it its own way
        given[option] = value
    return given if as_json and given["--hub"] else None


def serve_without_click(argv: list[str]) -> bool:
    """Serve ``argv`` (without the program) if :func:`quick_arguments` takes it: print the
    sessions, or say the error on one line and exit with status 1 (130 on Ctrl-C), as
    the command does through click. False when it does not take it (nothing done)."""
    given = quick_arguments(argv)
    if given is None:
        return False
    hub = given["--hub"]
    assert hub is not None
    try:
        print_sessions_json(hub, token=given["--client-token"])
    except RaydebugError as failure:
        error(str(failure))
        sys.exit(1)
    except KeyboardInterrupt:
        sys.exit(130)
    return True
