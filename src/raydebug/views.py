"""Pure functions from plain data to what the CLI shows: tables, configs, launch.json text.

No printing and no I/O here, so tests compare rendered text.
"""

from __future__ import annotations

import json
import os
import re
import time
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rich.table import Table

LAUNCH_CONFIG_NAME = "raydebug: attach to the cluster"


def format_age(since: float, now: float | None = None) -> str:
    seconds = max(0, int((now or time.time()) - since))
    if seconds < 60:
        return f"{seconds}s"
    if seconds < 3600:
        return f"{seconds // 60}m{seconds % 60:02d}s"
    return f"{seconds // 3600}h{seconds // 60 % 60:02d}m"


def short_path(path: str, width: int = 40) -> str:
    home = os.path.expanduser("~")
    if path.startswith(home + os.sep):
        path = "~" + path[len(home):]
    return path if len(path) <= width else "…" + path[-(width - 1):]


def sessions_table(sessions: list[dict[str, Any]], now: float | None = None) -> Table:
    """The ``raydebug list`` table, oldest session first."""
    from rich.table import Table  # only here: commands that print no table start faster

    table = Table(title=f"{len(sessions)} paused session(s)", title_justify="left")
    for column in ("id", "state", "host", "pid"):
        table.add_column(column, no_wrap=True)
    table.add_column("where", overflow="fold", ratio=3)
    table.add_column("reason", overflow="fold", ratio=2)
    table.add_column("age", no_wrap=True)
    table.add_column("labels", overflow="fold", ratio=1)
    for session in sessions:
        reason = session.get("reason", "")
        if session.get("exception"):
            reason = f"{reason}: {session['exception']}"
        labels = ", ".join(f"{k}={v}" for k, v in sorted((session.get("labels") or {}).items()))
        table.add_row(
            str(session.get("id", "")),
            str(session.get("state", "")),
            str(session.get("host", "")),
            str(session.get("pid", "")),
            f"{short_path(str(session.get('file', '')), 32)}:{session.get('line', '')} "
            f"in {session.get('function', '')}",
            reason,
            format_age(float(session.get("since", 0)), now),
            labels,
        )
    return table


def hub_warnings(health: dict[str, Any]) -> list[str]:
    """What ``raydebug list`` adds under its table from the hub's ``/api/health``: the
    connections it refused, which would otherwise be processes or IDE sessions that just
    never appear."""
    warnings = []
    clients = health.get("refused_clients_over_limit") or 0
    if clients:
        limit = (health.get("client_connections") or {}).get("limit", "?")
        warnings.append(f"the hub refused {clients} client connection(s) over its limit of "
                        f"{limit} per address (raise it with `raydebug hub "
                        "--max-client-connections`)")
    workers = health.get("refused_workers") or 0
    if workers:
        warnings.append(f"the hub refused {workers} worker connection(s): a wrong token, or "
                        "over `raydebug hub --max-worker-connections` (see the hub's log)")
    return warnings


def vscode_config(host: str, port: int, session: str | None = None,
                  name: str = LAUNCH_CONFIG_NAME,
                  path_mappings: list[dict[str, str]] | None = None,
                  client_token: str | None = None) -> dict[str, Any]:
    """VS Code's stock debugpy attach configuration pointing at the hub."""
    config: dict[str, Any] = {
        "name": name,
        "type": "debugpy",
        "request": "attach",
        "connect": {"host": host, "port": port},
        "justMyCode": False,
    }
    if session or client_token:
        config["raydebug"] = {}
    if session:
        config["raydebug"]["session"] = session
    if client_token:
        config["raydebug"]["token"] = client_token
    if path_mappings:
        config["pathMappings"] = path_mappings
    return config


def path_mappings(sessions: list[dict[str, Any]], local_root: str) -> list[dict[str, str]]:
    """Map each distinct place where Ray unpacked shipped code (a session's ``remote_root``)
    to the user's local checkout, as debugpy's ``pathMappings`` expects."""
    roots = sorted({s["remote_root"] for s in sessions if s.get("remote_root")})
    return [{"localRoot": local_root, "remoteRoot": root} for root in roots]


def merge_launch_json(existing: str | None, config: dict[str, Any]) -> str:
    """Return launch.json text with ``config`` added, or replacing one of the same name.

    ``existing`` may be VS Code's JSON with comments and trailing commas; other
    configurations and keys are kept (comments are not: the caller keeps a backup).
    Raises ValueError when ``existing`` cannot be understood.
    """
    data: dict[str, Any] = {"version": "0.2.0", "configurations": []}
    if existing and existing.strip():
        parsed = json.loads(strip_jsonc(existing))
        if not isinstance(parsed, dict):
            raise ValueError("launch.json is not a JSON object")
        data = parsed
    configurations = data.setdefault("configurations", [])
    if not isinstance(configurations, list):
        raise ValueError('launch.json "configurations" is not a list')
    configurations[:] = [c for c in configurations
                         if not (isinstance(c, dict) and c.get("name") == config["name"])]
    configurations.append(config)
    return json.dumps(data, indent=4) + "\n"


_JSONC_TOKENS = re.compile(r'"(?:\\.|[^"\\])*"|//[^\n]*|/\*.*?\*/|,(?=\s*[}\]])', re.DOTALL)


def strip_jsonc(text: str) -> str:
    """Remove comments and trailing commas, leaving strings alone."""
    return _JSONC_TOKENS.sub(lambda m: m.group(0) if m.group(0).startswith('"') else "", text)


def has_comments(text: str) -> bool:
    return strip_jsonc(text) != text


def hub_banner(client: str, worker: str, token: str, cert: str | None = None) -> str:
    """What ``raydebug hub`` prints once it listens. The first line is parsed by tools."""
    pin = f" RAYDEBUG_HUB_CERT={cert}" if cert else ""
    return (
        f"raydebug hub ready: clients {client} workers {worker}\n"
        + (f"Workers connect over TLS; certificate {cert}\n" if cert else "")
        + "Point Python processes at it:\n"
        f"  export PYTHONBREAKPOINT=raydebug.set_trace RAYDEBUG_HUB={worker} "
        f"RAYDEBUG_TOKEN={token}{pin}\n"
        f"Then attach a DAP client to {client}, or run: raydebug list --hub {client}\n"
    )
