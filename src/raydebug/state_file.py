"""Where a hub started on this machine can be found: a per-user state file.

``raydebug hub`` writes ``$XDG_STATE_HOME/raydebug/hub.json`` (default
``~/.local/state/raydebug/hub.json``, mode 0600: it holds the worker token and, with
``--tls``, the fingerprint workers pin) and removes it
when it exits. Commands and processes on the machine read it when no address was given.
A file left by a hub that crashed is recognised by its dead pid and ignored.

``hub-tokens.json`` beside it (mode 0600 too) keeps, by worker address, the token each hub
started there last used, after it exits: a process linked to a hub keeps the token it was
given, so a hub started again on the same address takes the same one (see
:func:`saved_token`), and the processes paused under the previous one link again.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any


def directory() -> Path:
    """The per-user state directory (the hub's TLS certificate lives there too)."""
    base = os.environ.get("XDG_STATE_HOME") or os.path.join(os.path.expanduser("~"), ".local",
                                                            "state")
    return Path(base) / "raydebug"


def path() -> Path:
    return directory() / "hub.json"


def write(client: str, worker: str, token: str, unix: str | None = None,
          cert: str | None = None) -> dict[str, Any]:
    """Record this process as the machine's hub; return what was written.

    ``cert``: the fingerprint of the agent listener's TLS certificate, when it has one.
    """
    record: dict[str, Any] = {"client": client, "worker": worker, "token": token,
                              "pid": os.getpid(), "unix": unix, "cert": cert}
    write_private(path(), json.dumps(record).encode())
    return record


def write_private(target: Path, data: bytes) -> None:
    """Write ``data`` to ``target`` with mode 0600 from the start (its directory 0700);
    readers never see half a file."""
    target.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    temporary = target.with_suffix(f".{os.getpid()}.tmp")
    descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(descriptor, "wb") as handle:
        handle.write(data)
    temporary.replace(target)


def read() -> dict[str, Any] | None:
    """The live hub's record, or None (no file, unreadable, or its hub is gone)."""
    try:
        record = json.loads(path().read_text())
        pid = int(record["pid"])
        str(record["client"]), str(record["worker"]), str(record["token"])
    except (OSError, ValueError, KeyError, TypeError):
        return None
    if not _alive(pid):
        return None  # a crashed hub's leftover
    return dict(record)


def remove(record: dict[str, Any]) -> None:
    """Remove the file if it still describes ``record`` (another hub may have replaced it)."""
    try:
        if json.loads(path().read_text()) == record:
            path().unlink()
    except (OSError, ValueError):
        pass


KEPT_TOKENS = 32  # worker addresses whose last token is kept (the most recent)


def saved_token(worker: str) -> str | None:
    """The token the last hub on ``worker`` (``host:port``) on this machine, of this user,
    served with; None when there is none (or the file cannot be read)."""
    token = _saved_tokens().get(worker)
    return token if isinstance(token, str) and token else None


def save_token(worker: str, token: str) -> None:
    """Keep ``token`` as the one a hub serves on ``worker`` with, for the next hub there.
    Raises OSError when the file cannot be written."""
    tokens = {address: kept for address, kept in _saved_tokens().items() if address != worker}
    tokens[worker] = token
    kept = dict(list(tokens.items())[-KEPT_TOKENS:])
    write_private(directory() / "hub-tokens.json", json.dumps(kept).encode())


def _saved_tokens() -> dict[str, Any]:
    try:
        tokens = json.loads((directory() / "hub-tokens.json").read_text())
    except (OSError, ValueError):
        return {}
    return tokens if isinstance(tokens, dict) else {}


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # alive, another user's
    return True
