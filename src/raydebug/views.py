"""Pure functions from plain data to what the CLI shows: tables, configs, launch.json text.

No printing and no I/O here, so tests compare rendered text.
"""

from __future__ import annotations

import json
import os
import re
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rich.console import RenderableType

LAUNCH_CONFIG_NAME = "raydebug: attach to the cluster"


def format_age(since: float, now: float | None = None) -> str:
    seconds = max(0, int((now or time.time()) - since))
    if seconds < 60:
        return f"{seconds}s"
    if seconds < 3600:
        return f"{seconds // 60}m{seconds % 60:02d}s"
    return f"{seconds // 3600}h{seconds // 60 % 60:02d}m"


def short_path(path: str, width: int = 40) -> str:
    """``path`` with the home directory as ``~``, cut from the left to at most ``width``
    characters, at a directory boundary when one is left (the file name is what tells
    places apart)."""
    home = os.path.expanduser("~")
    if path.startswith(home + os.sep):
        path = "~" + path[len(home):]
    if len(path) <= width:
        return path
    tail = path[-(width - 1):]
    # Start at a directory boundary: half a directory name is noise.
    boundary = tail.find(os.sep)
    return "…" + (tail[boundary:] if 0 <= boundary < len(tail) - 1 else tail)


def _cut_right(text: str, width: int) -> str:
    return text if len(text) <= width else text[:width - 1] + "…"


@dataclass(frozen=True)
class Column:
    """One column of ``raydebug list``: its cells as plain text, and how it narrows."""

    header: str
    cells: list[str]
    shrink_to: int  # the narrowest it may become (its longest cell if smaller)
    cut: Callable[[str, int], str] = _cut_right

    @cached_property
    def natural(self) -> int:
        return max([len(self.header), *(len(cell) for cell in self.cells)])

    @cached_property
    def narrowest(self) -> int:
        return min(self.natural, max(self.shrink_to, len(self.header)))


def _where(session: dict[str, Any]) -> str:
    return f"{session.get('file', '')}:{session.get('line', '')}"


def _whole_file_width(places: list[str]) -> int:
    """The width at which every ``file:line`` of ``places`` keeps its file name and line
    whole (``…/train.py:136``): what tells places apart."""
    return max([0, *(min(len(place), len(place.rsplit(os.sep, 1)[-1]) + 2)
                     for place in places)])


def _what(session: dict[str, Any]) -> str:
    """What ran: the Ray task (``Actor.method`` for an actor), else the function."""
    return str(session.get("task_name") or session.get("function") or "")


def _reason(session: dict[str, Any]) -> str:
    """``breakpoint``, the exception a post-mortem session stopped on, or ``pause (blocked
    in C)`` for a paused thread that has not returned to Python yet."""
    if session.get("blocked_in_c"):
        return f"{session.get('reason', '')} (blocked in C)"
    return str(session.get("exception") or session.get("reason", ""))


def _threads(sessions: list[dict[str, Any]]) -> list[str]:
    """Each session's thread name where its process has several sessions (a paused
    threaded actor: the same task and pid on every line), else nothing."""
    per_process = Counter((s.get("host"), s.get("pid")) for s in sessions)
    return [str(s.get("thread") or "") if per_process[(s.get("host"), s.get("pid"))] > 1
            else "" for s in sessions]


def session_columns(sessions: list[dict[str, Any]], now: float | None = None
                    ) -> list[Column]:
    """The columns of ``raydebug list`` in order, without those empty for every session
    (labels, job, ...) and without a job column when all sessions share one job."""
    ray = any(s.get("task_name") for s in sessions)
    jobs = {s.get("job_id") for s in sessions}
    places = [_where(s) for s in sessions]
    columns = [
        Column("id", [str(s.get("id", "")) for s in sessions], 12),
        Column("task" if ray else "function", [_what(s) for s in sessions], 12),
        Column("node", [str(s.get("node_ip") or s.get("host") or "") for s in sessions], 9),
        Column("pid", [str(s.get("pid", "")) for s in sessions], 7),
        Column("thread", _threads(sessions), 8),
        Column("where", places, _whole_file_width(places), short_path),
        Column("reason", [_reason(s) for s in sessions], 10),
        Column("age", [format_age(float(s.get("since", 0)), now) for s in sessions], 6),
        Column("state", [str(s.get("state", "")) for s in sessions], 8),
        Column("job", [str(s.get("job_id") or "") for s in sessions] if len(jobs) > 1
                else [], 8),
        Column("labels", [", ".join(f"{k}={v}" for k, v in sorted((s.get("labels") or {})
                                                                     .items()))
                           for s in sessions], 10),
    ]
    return [c for c in columns if any(c.cells)]


# The order in which columns give way when even their narrowest does not fit.
_DROP_FIRST = ("labels", "job", "state", "age", "node", "thread", "reason")
# Columns said once above the table when every session has the same value in them (a node
# column reading 10.0.0.7 on every line only takes room from the file names).
_SAID_ONCE = ("node", "state", "reason")
_GAP = 2  # spaces between columns; 1 below 80 columns, where every character counts


def fit_columns(columns: list[Column], width: int, gap: int = _GAP,
                drop_first: tuple[str, ...] = _DROP_FIRST) -> list[tuple[Column, int]]:
    """Choose each column's width so that one session takes one line of ``width``
    characters: the widest columns shrink first, level with the next (never below their
    narrowest); when even that does not fit, columns go in ``drop_first`` order (by
    header)."""
    columns = list(columns)
    while True:
        budget = width - gap * (len(columns) - 1)
        widths = _shrunk([c.natural for c in columns], [c.narrowest for c in columns], budget)
        droppable = [c for name in drop_first for c in columns if c.header == name]
        if sum(widths) > budget and not droppable:  # then below their narrowest
            widths = _shrunk(widths, [len(c.header) for c in columns], budget)
        if sum(widths) <= budget or not droppable:
            return list(zip(columns, widths, strict=True))
        columns.remove(droppable[0])


def _shrunk(widths: list[int], floors: list[int], budget: int) -> list[int]:
    """``widths`` with the widest narrowed first, one at a time, until they fit ``budget``
    or each is at its floor."""
    widths = list(widths)
    while sum(widths) > budget:
        shrinkable = [i for i, floor in enumerate(floors) if widths[i] > floor]
        if not shrinkable:
            break
        widths[max(shrinkable, key=lambda i: widths[i])] -= 1
    return widths


def said_once(columns: list[Column], rows: int, names: tuple[str, ...] = _SAID_ONCE
              ) -> tuple[list[Column], str]:
    """``columns`` without those among ``names`` whose cells are one value on every one of
    two or more rows, and those values said once: ``all: node 10.0.0.7, state waiting``
    (``""`` when none)."""
    same = {c.header for c in columns
            if rows > 1 and c.header in names and len(set(c.cells)) == 1}
    said = ", ".join(f"{c.header} {c.cells[0]}" for c in columns if c.header in same)
    return [c for c in columns if c.header not in same], f"all: {said}" if said else ""


def describe_session(session: dict[str, Any]) -> str:
    """One short line about a session (for shell completion): what, where, why."""
    return f"{_what(session)} at {short_path(_where(session), 40)} ({_reason(session)})"


def continued_lines(answer: dict[str, Any], width: int | None = None
                    ) -> tuple[list[str], list[str]]:
    """``raydebug continue``'s report (the hub's ``POST /api/continue`` answer): a line per
    session resumed and the count, for stdout; a line per session not resumed and why,
    for stderr. A session's thread is named where its process has several (``spin
    (PythonGCThread) at …/threading.py:327``: the task's name alone read as a function
    there). A resumed session's line fits ``width`` (the terminal's) where its file name
    allows: its place is cut from the left, then its thread's name goes; None: places cut
    to 40 characters, as the reasons' lines are."""
    resumed = answer.get("resumed") or []
    missed = answer.get("not_resumed") or []
    threads = dict(zip((id(s) for s in [*resumed, *missed]), _threads([*resumed, *missed]),
                       strict=True))
    gap = " " * (1 if width is not None and width < 80 else _GAP)

    def brief(lead: str, session: dict[str, Any]) -> str:
        labels = {str(k).lower(): v for k, v in (session.get("labels") or {}).items()}
        rank = f"rank {labels['rank']}{gap}" if "rank" in labels else ""
        head = f"{lead} {session.get('id')}{gap}{rank}pid {session.get('pid')}{gap}"
        where = _where(session)
        thread = threads[id(session)]
        whats = [f"{_what(session)} ({thread})"] if thread else []
        whats.append(_what(session))
        if width is None:
            return f"{head}{whats[0]} at {short_path(where, 40)}"
        narrowest = _whole_file_width([where])
        for what in whats:
            room = width - len(f"{head}{what} at ")
            if room >= narrowest:
                return f"{head}{what} at {short_path(where, room)}"
        return f"{head}{whats[-1]} at {short_path(where, narrowest)}"

    processes = len({(s.get("host"), s.get("pid")) for s in resumed})
    count = (f"continued {_plural(len(resumed), 'session')} in "
             f"{_plural(processes, 'process', 'processes')}")
    if missed:
        count += f"; {len(missed)} not"
    out = [brief("continued", s) for s in resumed] + [count]
    return out, [f"{brief('not continued', s)}: {s.get('reason')}" for s in missed]


def _plural(n: int, one: str, many: str = "") -> str:
    return f"{n} {one if n == 1 else many or one + 's'}"


def sessions_table(sessions: list[dict[str, Any]], now: float | None = None,
                   width: int = 120, hub: str = "", found_by: str = "") -> RenderableType:
    """The ``raydebug list`` table, oldest session first, one line per session at
    ``width`` columns (the terminal's). With no sessions: one line saying so, and where
    it looked (``hub``, found by ``found_by``)."""
    from rich.text import Text  # only here: commands that print no table start faster

    asked = f" on the hub at {hub}" if hub else ""
    if not sessions:
        how = f" ({found_by})" if found_by else ""
        return Text(f"no sessions{asked}{how}: nothing is paused")
    title = f"{len(sessions)} paused session{'s' if len(sessions) != 1 else ''}{asked}"
    columns, said = said_once(session_columns(sessions, now), len(sessions))
    if said:  # on the title's line when both fit, else on a line of its own
        title += f"; {said}" if len(title) + 2 + len(said) <= width else f"\n{said}"
    return fitted_table(title, columns, len(sessions), width)


def fitted_table(title: str, columns: list[Column], rows: int, width: int,
                 drop_first: tuple[str, ...] = _DROP_FIRST) -> RenderableType:
    """A table of ``columns`` (``rows`` cells each) under ``title`` (each of its lines
    cut to ``width``), one line per row at ``width`` columns (see :func:`fit_columns`)."""
    from rich.console import Group
    from rich.text import Text

    gap = _GAP if width >= 80 else 1
    heading = Text("\n".join(_cut_right(part, width) for part in title.split("\n")),
                   no_wrap=True, style="italic")
    fitted = fit_columns(columns, width, gap, drop_first)
    columns = [column for column, _ in fitted]
    widths = [column_width for _, column_width in fitted]
    cells = [[c.cut(cell, w) for cell in c.cells] for c, w in fitted]
    # A path cut at a directory boundary leaves room: give it to a column that was cut.
    used = [max([len(c.header), *(len(cell) for cell in cut)])
            for c, cut in zip(columns, cells, strict=True)]
    slack = sum(widths) - sum(used)
    for index, column in enumerate(columns):
        if slack > 0 and used[index] == widths[index] < column.natural:
            extra = min(slack, column.natural - widths[index])
            used[index] += extra
            slack -= extra
            cells[index] = [column.cut(cell, used[index]) for cell in column.cells]
    # Every cell is cut to its column already: the lines are joined here, not by rich's
    # Table, which takes seconds for a thousand rows (``raydebug ps`` of a large job).
    def line(texts: list[str]) -> str:
        return (" " * gap).join(text.ljust(w) for text, w in zip(texts, used, strict=True)
                                ).rstrip()

    header = Text(line([column.header for column in columns]), style="bold", no_wrap=True)
    body = [Text(line([cut[row] for cut in cells]), no_wrap=True) for row in range(rows)]
    return Group(heading, header, *body)


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
    agents = health.get("refused_agents") or 0
    if agents:
        warnings.append(f"the hub refused {agents} agent connection(s): a wrong token, or "
                        "over `raydebug hub --max-agent-connections` (see the hub's log)")
    return warnings


def vscode_config(host: str, port: int, session: str | None = None,
                  name: str = LAUNCH_CONFIG_NAME, local_root: str | None = None,
                  client_token: str | None = None) -> dict[str, Any]:
    """VS Code's stock debugpy attach configuration pointing at the hub.

    ``local_root``: the user's checkout of code Ray shipped with ``working_dir``; the hub
    maps each session's ``remote_root`` to it and back (debugpy's ``pathMappings`` would
    name the job's ``_ray_pkg_<hash>`` directory, which changes with every submission).
    """
    config: dict[str, Any] = {
        "name": name,
        "type": "debugpy",
        "request": "attach",
        "connect": {"host": host, "port": port},
        "justMyCode": False,
    }
    settings: dict[str, str] = {}
    if session:
        settings["session"] = session
    if client_token:
        settings["token"] = client_token
    if local_root:
        settings["localRoot"] = local_root
    if settings:
        config["raydebug"] = settings
    return config


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


def hub_banner(client: str, agents: str, token: str, cert: str | None = None) -> str:
    """What ``raydebug hub`` prints once it listens. The first line is parsed by tools."""
    pin = f" RAYDEBUG_HUB_CERT={cert}" if cert else ""
    return (
        f"raydebug hub ready: clients {client} agents {agents}\n"
        + (f"Agents connect over TLS; certificate {cert}\n" if cert else "")
        + "Point Python processes at it:\n"
        f"  export PYTHONBREAKPOINT=raydebug.set_trace RAYDEBUG_HUB={agents} "
        f"RAYDEBUG_TOKEN={token}{pin}\n"
        f"Then attach a DAP client to {client}, or run: raydebug list --hub {client}\n"
        # Without it a process reaches the hub only at its first breakpoint(): `ps`,
        # `stacks` and `pause` (what a hang needs) would list nothing.
        f"Add RAYDEBUG_LIVE=1 to link them from their start (raydebug ps, stacks, pause)\n"
    )


def tunnel_banner(port: int, destination: str) -> str:
    """What ``raydebug tunnel`` prints once the forward works. The first line is parsed by
    tools."""
    config = json.dumps(vscode_config("127.0.0.1", port), indent=4).replace("\n", "\n    ")
    return (f"raydebug tunnel ready: 127.0.0.1:{port} -> hub on {destination}\n"
            f"  raydebug list --hub 127.0.0.1:{port}\n"
            f"  raydebug attach --hub 127.0.0.1:{port}\n"
            "  VS Code launch.json configuration:\n"
            f"    {config}\n")
