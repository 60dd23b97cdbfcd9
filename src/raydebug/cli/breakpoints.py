"""``raydebug break``: cluster breakpoints from the terminal, without an IDE.

``raydebug break FILE:LINE [if CONDITION]`` arms a breakpoint in every linked process, now
and as processes start (the hub's ``POST /api/breakpoints``); ``--log MESSAGE`` makes it a
logpoint. ``--list`` shows every cluster breakpoint, an IDE's included; ``--clear`` removes
those set from the terminal (an IDE's belong to it). ``raydebug attach --follow`` then takes
each hit in turn, and ``raydebug logs [--follow]`` prints the logpoints' lines.
"""

from __future__ import annotations

import json
import os
from typing import Any

import click

from ..client.hub_api import get_json, post_json
from ..errors import ConfigurationError
from .locate import locate_hub
from .options import CLIENT_TOKEN_OPTION, HUB_OPTION, RAY_ADDRESS_OPTION


def parse_spec(words: tuple[str, ...]) -> tuple[str, int, str]:
    """``("job.py:12", "if", "i", "==", "3")`` -> (absolute path, 12, ``"i == 3"``).

    Raises :class:`ConfigurationError` naming the expected form."""
    usage = "expected FILE:LINE [if CONDITION], e.g. `raydebug break job.py:12 if i == 3`"
    if not words:
        raise ConfigurationError(f"no breakpoint given: {usage}")
    where, rest = words[0], list(words[1:])
    path, _, line_text = where.rpartition(":")
    if not path or not line_text.isdigit() or int(line_text) < 1:
        raise ConfigurationError(f"{where!r} is not FILE:LINE: {usage}")
    if rest and rest[0] != "if":
        raise ConfigurationError(f"unexpected {rest[0]!r} after {where}: {usage}")
    condition = " ".join(rest[1:]).strip()
    if rest and not condition:
        raise ConfigurationError(f"`if` without a condition: {usage}")
    return os.path.abspath(path), int(line_text), condition


# The hub's owners of cluster breakpoints besides IDEs (whose owner is their connection).
TERMINAL_CLIENT = "terminal"  # `raydebug break`
OWNERS = (TERMINAL_CLIENT, "web page")


def format_breakpoints(listing: list[dict[str, Any]]) -> str:
    """One line per breakpoint: ``/x/job.py:12 if i == 3  [verified] (terminal)``."""
    if not listing:
        return "no cluster breakpoints"
    lines = []
    for entry in listing:
        text = f"{entry['path']}:{entry['line']}"
        if entry.get("condition"):
            text += f" if {entry['condition']}"
        if entry.get("hitCondition"):
            text += f" (hit {entry['hitCondition']})"
        if entry.get("logMessage"):
            text += f" log {entry['logMessage']!r}"
        state = "verified" if entry.get("verified") else "not loaded yet"
        who = entry.get("client") if entry.get("client") in OWNERS else "IDE"
        lines.append(f"{text}  [{state}] ({who})")
    return "\n".join(lines)


@click.command("logs")
@HUB_OPTION
@RAY_ADDRESS_OPTION
@CLIENT_TOKEN_OPTION
@click.option("--follow", "-f", is_flag=True, help="Keep printing new lines as they come.")
@click.option("--timeout", default=0.0, metavar="SECONDS",
              help="With --follow: stop after this many seconds without a line (0: never).")
def logs_command(hub: str | None, ray_address: str | None, client_token: str | None,
                 follow: bool, timeout: float) -> None:
    """Print the cluster's logpoint lines (the last 1,000 the hub kept), then, with
    --follow, each new one: ``[task, rank 3, pid 4242] text``."""
    address = locate_hub(hub, ray_address).address
    after, first = 0, True
    while True:
        wait = 0.0 if first else (timeout or 60.0)  # 60 s: one long poll, then the next
        answer = get_json(address, f"/api/logpoints?after={after}&timeout={wait:g}",
                          timeout=wait + 10.0, token=client_token)
        lines = answer.get("lines") or []
        for _number, text in lines:
            click.echo(text, nl=False)
        after = int(answer.get("last") or after)
        if not follow or (not first and not lines and timeout):
            return
        first = False


@click.command("break")
@HUB_OPTION
@RAY_ADDRESS_OPTION
@CLIENT_TOKEN_OPTION
@click.argument("spec", nargs=-1)
@click.option("--log", "log_message", default=None, metavar="MESSAGE",
              help="A logpoint: print MESSAGE ({expr} parts evaluated in the frame) on the "
                   "cluster session's console instead of pausing.")
@click.option("--local-root", default=None, metavar="DIR",
              help="Your checkout, when the code runs from Ray's working_dir (FILE is "
                   "relative to it there).")
@click.option("--list", "as_list", is_flag=True, help="List every cluster breakpoint.")
@click.option("--clear", is_flag=True, help="Remove the breakpoints set from the terminal.")
@click.option("--json", "as_json", is_flag=True, help="Print the hub's answer as JSON.")
def break_command(hub: str | None, ray_address: str | None, client_token: str | None,
                  spec: tuple[str, ...], log_message: str | None, local_root: str | None,
                  as_list: bool, clear: bool, as_json: bool) -> None:
    """Pause every process that reaches FILE:LINE [if CONDITION] (no breakpoint() needed)."""
    if sum((bool(spec), as_list, clear)) != 1:
        raise ConfigurationError("give FILE:LINE [if CONDITION], --list or --clear (one)")
    address = locate_hub(hub, ray_address).address
    if as_list:
        answer = get_json(address, "/api/breakpoints", token=client_token)
    elif clear:
        before = get_json(address, "/api/breakpoints", token=client_token)
        answer = post_json(address, "/api/breakpoints", {"clear": True}, token=client_token)
        cleared = [b for b in before.get("breakpoints") or []
                   if b.get("client") == TERMINAL_CLIENT]
    else:
        path, line, condition = parse_spec(spec)
        body: dict[str, Any] = {"path": path, "line": line}
        if condition:
            body["condition"] = condition
        if log_message:
            body["logMessage"] = log_message
        if local_root:
            body["localRoot"] = os.path.abspath(local_root)
        before = get_json(address, "/api/breakpoints", token=client_token)
        answer = post_json(address, "/api/breakpoints", body, token=client_token)
        replaced = [b for b in before.get("breakpoints") or []
                    if b.get("client") == TERMINAL_CLIENT and b.get("line") == line
                    and b.get("path") == path]
    if as_json:
        click.echo(json.dumps(answer, indent=2))
        return
    if clear:  # what went, then what is left (an IDE's)
        click.echo(f"cleared {len(cleared)} breakpoint{'s' if len(cleared) != 1 else ''} "
                   "set from the terminal" + (":" if cleared else ""))
        for entry in cleared:
            click.echo(f"  {format_breakpoints([entry])}")
        if left := answer.get("breakpoints"):
            click.echo(f"left: {format_breakpoints(left)}")
        return
    click.echo(format_breakpoints(answer.get("breakpoints") or []))
    if spec and replaced:  # one breakpoint a line, as in an IDE: say what went
        click.echo(f"(replaced {format_breakpoints(replaced)})")
