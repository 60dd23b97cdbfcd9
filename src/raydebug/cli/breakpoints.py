"""``raydebug break``: cluster breakpoints from the terminal, without an IDE.

``raydebug break FILE:LINE [if CONDITION]`` arms a breakpoint in every linked process, now
and as processes start (the hub's ``POST /api/breakpoints``); ``--log MESSAGE`` makes it a
logpoint, ``--snapshot [--count N]`` a snapshot point (a logpoint whose message is
``{snapshot}``, with the hit condition ``<=N``: see
:mod:`raydebug.agent.armed.line_breakpoint`); one quoted word ``'FILE:LINE if CONDITION'``
is the same. ``--list`` shows every cluster breakpoint, an IDE's included; ``--remove
FILE:LINE`` removes one, ``--clear`` those set from the terminal (an IDE's belong to it).
``raydebug attach --follow`` then takes each hit in turn, and ``raydebug logs [--follow]``
prints the logpoints' lines.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import sys
from typing import Any

import click

from ..client.hub_api import get_json, post_json
from ..errors import ConfigurationError
from ..snapshots.format import SNAPSHOT_POINT_MESSAGE
from .locate import locate_hub
from .options import CLIENT_TOKEN_OPTION, HUB_OPTION, RAY_ADDRESS_OPTION
from .output import note

USAGE = "expected FILE:LINE [if CONDITION], e.g. `raydebug break 'job.py:12 if i > 3'`"
# FILE:LINE, then anything after a space (a path may hold spaces, and colons before its line)
_WHERE = re.compile(r"(?P<path>.+?):(?P<line>\d+)(?:\s+(?P<rest>.*))?", re.DOTALL)


def parse_spec(words: tuple[str, ...]) -> tuple[str, int, str]:
    """``("job.py:12", "if", "i", "==", "3")`` or, as one quoted word, ``("job.py:12 if
    i > 3",)`` -> (absolute path, 12, ``"i > 3"``).

    Raises :class:`ConfigurationError` naming the expected form."""
    if not words:
        raise ConfigurationError(f"no breakpoint given: {USAGE}")
    text = " ".join(words).strip()
    where = _WHERE.fullmatch(text)
    if where is None or int(where["line"]) < 1:
        raise ConfigurationError(f"{words[0]!r} is not FILE:LINE: {USAGE}")
    rest = (where["rest"] or "").split(maxsplit=1)  # ["if", "CONDITION"], or fewer
    keyword, condition = (rest[0] if rest else ""), (rest[1] if len(rest) > 1 else "")
    place = f"{where['path']}:{where['line']}"
    if keyword and keyword != "if":
        raise ConfigurationError(f"unexpected {keyword!r} after {place}: {USAGE}")
    if keyword and not condition.strip():
        raise ConfigurationError(f"`if` without a condition: {USAGE}")
    return os.path.abspath(where["path"]), int(where["line"]), condition.strip()


def place_warning(path: str, line: int) -> str | None:
    """A line to say when FILE:LINE cannot be checked or cannot stop, else None. The
    breakpoint is set anyway: the processes may run a file this machine does not have (a
    node's own copy, a Ray working_dir), and a cluster breakpoint is matched by path."""
    try:
        with open(path, "rb") as source:
            lines = len(source.read().splitlines())
    except FileNotFoundError:
        return (f"note: no {path} on this machine: set for the processes that run a file by "
                "that path (code from a Ray working_dir: add --local-root YOUR_CHECKOUT)")
    except OSError as error:
        return f"note: {path} cannot be read here ({error.strerror}): set by its path"
    if line > lines:
        return (f"note: {path} has {lines} lines: nothing stops at line {line} in a process "
                "that runs this file")
    return None


def parse_place(text: str) -> tuple[str, int]:
    """``"job.py:12"`` -> (absolute path, 12): the breakpoint ``--remove`` names. Raises
    :class:`ConfigurationError`."""
    path, line, condition = parse_spec((text,))
    if condition:
        raise ConfigurationError(f"--remove takes FILE:LINE (one breakpoint a line), not "
                                 f"{text!r}")
    return path, line


# The hub's owners of cluster breakpoints besides IDEs (whose owner is their connection).
TERMINAL_CLIENT = "terminal"  # `raydebug break`
OWNERS = (TERMINAL_CLIENT, "web page")


def format_breakpoints(listing: list[dict[str, Any]], width: int | None = None) -> str:
    """One line per breakpoint: ``/x/job.py:12 if i == 3  [verified] (terminal)``. A line
    longer than ``width`` (a terminal's; None: never cut) has its path cut from the left,
    down to its file name (``…/x/job.py:12``), as ``raydebug list`` cuts its places."""
    if not listing:
        return "no cluster breakpoints"
    lines = []
    for entry in listing:
        text = f":{entry['line']}"
        if entry.get("condition"):
            text += f" if {entry['condition']}"
        if entry.get("logMessage", "").strip() == SNAPSHOT_POINT_MESSAGE:
            count = _snapshot_count(entry.get("hitCondition") or "")
            text += " snapshot" + (f" (first {_plural(count, 'hit')} per process)" if count
                                   else f" (hit {entry['hitCondition']})"
                                   if entry.get("hitCondition") else "")
        else:
            if entry.get("hitCondition"):
                text += f" (hit {entry['hitCondition']})"
            if entry.get("logMessage"):
                text += f" log {entry['logMessage']!r}"
        state = "verified" if entry.get("verified") else "not loaded yet"
        who = entry.get("client") if entry.get("client") in OWNERS else "IDE"
        text += f"  [{state}] ({who})"
        path = str(entry["path"])
        if width is not None and len(path) + len(text) > width:
            from ..views import short_path

            path = short_path(path, max(width - len(text), len(os.path.basename(path)) + 2))
        lines.append(path + text)
    return "\n".join(lines)


def _width(prefix: str = "") -> int | None:
    """The columns a breakpoint's line has after ``prefix`` in this terminal; None when
    stdout is no terminal (a pipe's lines keep their whole paths)."""
    if not sys.stdout.isatty():
        return None
    return shutil.get_terminal_size().columns - len(prefix)


def _plural(count: int, word: str) -> str:
    return word if count == 1 else f"{count} {word}s"


def _snapshot_count(hit_condition: str) -> int | None:
    """N of a snapshot point's ``<=N`` (what ``--count N`` sets), else None."""
    found = re.fullmatch(r"\s*<=\s*(\d+)\s*", hit_condition)
    return int(found[1]) if found else None


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
    location = locate_hub(hub, ray_address)
    address = location.address
    after, first = 0, True
    while True:
        wait = 0.0 if first else (timeout or 60.0)  # 60 s: one long poll, then the next
        answer = get_json(address, f"/api/logpoints?after={after}&timeout={wait:g}",
                          timeout=wait + 10.0, token=client_token)
        lines = answer.get("lines") or []
        if first and not lines:  # said on stderr: an empty output read as a failure
            note(f"no logpoint lines on the hub at {location.describe()}"
                 + (" yet; waiting for them (Ctrl-C stops)" if follow else
                    "; `raydebug break FILE:LINE --log MESSAGE` sets a logpoint"))
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
@click.option("--snapshot", is_flag=True,
              help="A snapshot point: each hit captures the frame and its callers' locals "
                   "for the hub (raydebug list) and never pauses.")
@click.option("--count", type=click.IntRange(min=1), default=None, metavar="N",
              help="With --snapshot: hits captured per process before it stops taking "
                   "them (default 1).")
@click.option("--local-root", default=None, metavar="DIR",
              help="Your checkout, when the code runs from Ray's working_dir (FILE is "
                   "relative to it there).")
@click.option("--list", "as_list", is_flag=True, help="List every cluster breakpoint.")
@click.option("--remove", default=None, metavar="FILE:LINE",
              help="Remove the breakpoint on this line (set from the terminal or the web "
                   "page; an IDE's is removed in the IDE).")
@click.option("--clear", is_flag=True, help="Remove the breakpoints set from the terminal.")
@click.option("--json", "as_json", is_flag=True, help="Print the hub's answer as JSON.")
def break_command(hub: str | None, ray_address: str | None, client_token: str | None,
                  spec: tuple[str, ...], log_message: str | None, snapshot: bool,
                  count: int | None, local_root: str | None, as_list: bool,
                  remove: str | None, clear: bool, as_json: bool) -> None:
    """Pause every process that reaches FILE:LINE [if CONDITION] (no breakpoint() needed;
    with --log it logs instead, with --snapshot it captures a snapshot instead).
    Quote it as one word when the condition holds what the shell reads (> < ( | &):
    raydebug break 'job.py:12 if len(rows) > 3'."""
    if sum((bool(spec), as_list, remove is not None, clear)) != 1:
        raise ConfigurationError("give FILE:LINE [if CONDITION], --list, --remove FILE:LINE "
                                 "or --clear (one)")
    if snapshot and log_message is not None:
        raise ConfigurationError("--snapshot and --log: a line takes one of them")
    if count is not None and not snapshot:
        raise ConfigurationError("--count counts a snapshot point's hits: add --snapshot")
    place = parse_place(remove) if remove is not None else None
    address = locate_hub(hub, ray_address).address
    if as_list:
        answer = get_json(address, "/api/breakpoints", token=client_token)
    elif place is not None:
        path, line = place
        answer = post_json(address, "/api/breakpoints",
                           {"remove": {"path": path, "line": line}}, token=client_token)
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
        if snapshot:
            body.update(logMessage=SNAPSHOT_POINT_MESSAGE, hitCondition=f"<={count or 1}")
        if local_root:
            body["localRoot"] = os.path.abspath(local_root)
        if warning := place_warning(path, line):
            click.echo(warning, err=True)
        before = get_json(address, "/api/breakpoints", token=client_token)
        answer = post_json(address, "/api/breakpoints", body, token=client_token)
        replaced = [b for b in before.get("breakpoints") or []
                    if b.get("client") == TERMINAL_CLIENT and b.get("line") == line
                    and b.get("path") == path]
    if as_json:
        click.echo(json.dumps(answer, indent=2))
        return
    if place is not None:
        removed = answer.get("removed") or []
        if not removed:
            raise ConfigurationError(_nothing_to_remove(place, answer.get("breakpoints") or []))
        click.echo(f"removed {format_breakpoints(removed, _width('removed '))}")
        return
    if clear:  # what went, then what is left (an IDE's)
        click.echo(f"cleared {len(cleared)} breakpoint{'s' if len(cleared) != 1 else ''} "
                   "set from the terminal" + (":" if cleared else ""))
        for entry in cleared:
            click.echo(f"  {format_breakpoints([entry], _width('  '))}")
        if left := answer.get("breakpoints"):
            click.echo(f"left: {format_breakpoints(left, _width('left: '))}")
        return
    click.echo(format_breakpoints(answer.get("breakpoints") or [], _width()))
    if spec and replaced:  # one breakpoint a line, as in an IDE: say what went
        click.echo(f"(replaced {format_breakpoints(replaced, _width('(replaced )'))})")


def _nothing_to_remove(place: tuple[str, int], listing: list[dict[str, Any]]) -> str:
    """Why ``--remove`` removed nothing at ``place``: no breakpoint there, or an IDE's."""
    path, line = place
    if any(b.get("path") == path and b.get("line") == line for b in listing):
        return (f"the breakpoint at {path}:{line} was set by an IDE: remove it there "
                "(raydebug break --remove takes the terminal's and the web page's)")
    return f"no cluster breakpoint at {path}:{line} (raydebug break --list shows them)"
