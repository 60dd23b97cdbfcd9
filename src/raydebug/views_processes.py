"""Pure functions from plain data to what ``raydebug ps`` and ``raydebug stacks`` show.

``ps`` is a table like ``raydebug list``'s (:func:`raydebug.views.fitted_table`): one line
per process at the terminal's width, empty columns left out. ``stacks`` draws the merged
tree of :mod:`raydebug.stack_tree` (its JSON form, as the hub's ``/api/stacks`` answers it)::

    4 processes on the hub at 127.0.0.1:5678
    4  main   job.py:30  train()
    4  train  job.py:20,22
    3  ├ step  job.py:12  total += x  ← 3 processes here: ranks 0, 2, 3
    1  └ wait  threading.py:5  lock.acquire()  ← 1 process here: rank 1

The left column counts the processes on each frame. A chain of frames that every process of
a group shares stays at one indentation; the tree indents only where the group splits, so
the depth on screen is the number of splits, not of frames. An odd group (a minority among
its peers: the same task, actor method or ranks) and everything under it is drawn in red.
Every line fits ``width``: the source line gives way first, then the path (cut from the
left), then the function.

No printing and no I/O here, so tests compare rendered text.
"""

from __future__ import annotations

import posixpath
from collections import defaultdict
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from .peer_groups import RANK_LABELS, RAY_WORKER_MAIN
from .stack_tree import ProcessRef, describe_group
from .views import Column, fitted_table, format_age, short_path

if TYPE_CHECKING:
    from rich.console import RenderableType
    from rich.text import Text

HOW_TO_LINK = ("processes link when started under `raydebug run` or with RAYDEBUG_LIVE=1; "
               "`raydebug link pid=N` links one that runs")
ODD_STYLE = "bold red"
MAX_LOCALS_SHOWN = 10  # local names shown under one frame; then "… N more"
MIN_FRAME_BESIDE_LABEL = 32  # narrower than this, a leaf's label goes on the next line
MAX_LINES_SHOWN = 3  # lines of an inner frame named after its path; then "+N"

# The order in which ``ps`` columns give way when even their narrowest does not fit.
PS_DROP_FIRST = ("labels", "command", "job", "age", "sessions", "node", "state")


def _cut(text: str, width: int) -> str:
    if width <= 0:
        return ""
    return text if len(text) <= width else text[:width - 1] + "…"


def _rank(process: Mapping[str, Any]) -> str:
    labels = process.get("labels") or {}
    return next((str(labels[key]) for key in RANK_LABELS if key in labels), "")


def _other_labels(process: Mapping[str, Any]) -> str:
    labels = process.get("labels") or {}
    return ", ".join(f"{key}={value}" for key, value in sorted(labels.items())
                     if key not in RANK_LABELS)


# Before a task a process did not confirm for this listing (not answered in its bound):
# in front, where a cut cell keeps it.
STALE_MARK = "*"


def _task(process: Mapping[str, Any]) -> str:
    """What a Ray worker runs now (task or ``Actor.method``), else its actor class; with
    :data:`STALE_MARK` when that is its answer to an earlier listing (``activity_stale``)."""
    task = str(process.get("task_name") or process.get("actor_class") or "")
    return f"{STALE_MARK}{task}" if task and process.get("activity_stale") else task


def _command(process: Mapping[str, Any]) -> str:
    """The command line, its program by name only (a cut cell keeps what tells processes
    apart); a Ray worker's is Ray's own long one, the same for all: ``ray worker``."""
    argv = [str(a) for a in process.get("argv") or []]
    if not argv:
        return ""
    if argv[0].replace("\\", "/").endswith(RAY_WORKER_MAIN):
        return "ray worker"
    return " ".join([posixpath.basename(argv[0]) or argv[0], *argv[1:]])


def process_columns(processes: Sequence[Mapping[str, Any]], now: float | None = None
                    ) -> list[Column]:
    """The columns of ``raydebug ps`` in order, without those empty for every process, and
    without a job column when they all share one job."""
    jobs = {p.get("job_id") for p in processes}
    columns = [
        Column("id", [str(p.get("id", "")) for p in processes], 10),
        Column("pid", [str(p.get("pid", "")) for p in processes], 7),
        Column("node", [str(p.get("node_ip") or p.get("host") or "") for p in processes], 9),
        Column("rank", [_rank(p) for p in processes], 4),
        Column("state", [_state(p, now) for p in processes], 7),
        Column("sessions", [",".join(str(s) for s in p.get("sessions") or [])
                            for p in processes], 12),  # an id to attach to, whole
        Column("task", [_task(p) for p in processes], 12),
        Column("age", [format_age(float(p.get("since") or 0), now) if p.get("since") else ""
                       for p in processes], 6),
        Column("job", [str(p.get("job_id") or "") for p in processes] if len(jobs) > 1
               else [], 8),
        Column("command", [_command(p) for p in processes], 12),
        Column("labels", [_other_labels(p) for p in processes], 10),
    ]
    return [c for c in columns if any(c.cells)]


def _state(process: Mapping[str, Any], now: float | None) -> str:
    """``running``, ``paused``, or ``pause requested 12s`` for a running process whose
    threads asked to pause have not stopped (the age of the oldest ask)."""
    requested = process.get("pause_requested")
    if process.get("state") == "running" and isinstance(requested, dict) \
            and requested.get("threads"):
        return f"pause requested {format_age(float(requested.get('since') or 0), now)}"
    return str(process.get("state", ""))


def processes_table(processes: Sequence[Mapping[str, Any]], now: float | None = None,
                    width: int = 120, hub: str = "", found_by: str = "") -> RenderableType:
    """The ``raydebug ps`` table, one line per process at ``width`` columns, in rank order
    (processes without a rank after, oldest first). With no
    processes: one line saying so, where it looked, and how processes get linked."""
    from rich.text import Text

    asked = f" on the hub at {hub}" if hub else ""
    if not processes:
        how = f" ({found_by})" if found_by else ""
        return Text(f"no live processes{asked}{how}: {HOW_TO_LINK}")
    processes = sorted(processes, key=_listing_order)
    paused = sum(1 for p in processes if p.get("state") == "paused")
    stale = sum(1 for p in processes if p.get("activity_stale") and _task(p))
    title = (f"{len(processes)} live process{'es' if len(processes) != 1 else ''}{asked}"
             + (f", {paused} paused" if paused else "")
             + (f"; {STALE_MARK} = last answer ({stale})" if stale else ""))
    return fitted_table(title, process_columns(processes, now), len(processes), width,
                        PS_DROP_FIRST)


def _listing_order(process: Mapping[str, Any]) -> tuple[bool, int, float, int]:
    """Ranks in order, then the others oldest first (as ``raydebug list``)."""
    rank = _rank(process)
    ranked = rank.lstrip("-").isdigit()
    return (not ranked, int(rank) if ranked else 0, float(process.get("since") or 0),
            int(process.get("pid") or 0))


def brief_process(process: Mapping[str, Any]) -> str:
    """One short line about a process, as the hub words them in a "matches nothing"
    answer: ``p3 pid 1234 on node-1 running RANK=1 task=f``."""
    words = [process.get("id", ""), f"pid {process.get('pid', '?')}",
             f"on {process.get('node_ip') or process.get('host') or '?'}",
             process.get("state", "")]
    words += [f"{k}={v}" for k, v in sorted((process.get("labels") or {}).items())]
    for name, key in (("task_name", "task"), ("actor_class", "actor")):
        if process.get(name):
            words.append(f"{key}={process[name]}")
    return " ".join(str(word) for word in words if word)


# ---- stacks ----------------------------------------------------------------------------


def _lines(node: Mapping[str, Any]) -> str:
    lines = [str(n) for n in node.get("lines") or []]
    if len(lines) > MAX_LINES_SHOWN:
        lines = [*lines[:MAX_LINES_SHOWN], f"+{len(lines) - MAX_LINES_SHOWN}"]
    return ",".join(lines)


def _frame_text(node: Mapping[str, Any], room: int) -> str:
    """``function  path:line  code`` in at most ``room`` characters: the code is cut
    first, then the path (from the left, so the file name stays), then the function."""
    function = str(node.get("function") or "?")
    code = str(node.get("code") or "")
    path = short_path(str(node.get("file") or "?"), 10_000)  # ~ for the home directory
    lines = f":{_lines(node)}" if _lines(node) != "0" else ""  # a C frame (py-spy's) has none
    base = f"{function}  {path}{lines}"
    if code and len(base) + 6 <= room:  # the path whole and some of the code
        return _cut(f"{base}  {code}", room)
    path_room = room - len(function) - 2 - len(lines)
    return _cut(f"{function}  {short_path(path, max(path_room, 12))}{lines}", room)


class _StackLines:
    """Collects the ``stacks`` lines as rich Text, each cut to ``width``."""

    def __init__(self, width: int, count_width: int, with_locals: bool) -> None:
        self.width = width
        self.count_width = count_width
        self.with_locals = with_locals
        self.lines: list[Text] = []

    def add(self, count: str, guide: str, body: str, odd: bool = False) -> None:
        """One line: the count column, the guide (capped), then ``body`` cut to fit."""
        from rich.text import Text

        lead = f"{count:>{self.count_width}}  "
        guide = _cap_guide(guide, self.width // 3)
        line = Text(no_wrap=True, overflow="crop")
        line.append(lead, style=ODD_STYLE if odd else "bold")
        line.append(guide, style="dim")
        line.append(_cut(body, self.width - len(lead) - len(guide)), style="red" if odd else "")
        self.lines.append(line)

    def frame(self, node: Mapping[str, Any], guide: str, odd: bool) -> None:
        """A frame's line; at a leaf with the group's label (``← 3 processes here: ...``),
        which takes a line of its own when frame and label do not fit side by side."""
        count = str((node.get("count") or {}).get("processes", ""))
        room = self.width - self.count_width - 2 - len(_cap_guide(guide, self.width // 3))
        suffix = f"← {node.get('label', '')}" if node.get("leaf") else ""
        whole = _frame_text(node, 10_000)
        if not suffix:
            self.add(count, guide, _frame_text(node, room), odd)
        elif len(whole) + 2 + len(suffix) <= room:
            self.add(count, guide, f"{whole}  {suffix}", odd)
        elif room - len(suffix) - 2 >= MIN_FRAME_BESIDE_LABEL:
            self.add(count, guide, f"{_frame_text(node, room - len(suffix) - 2)}  {suffix}",
                     odd)
        else:
            self.add(count, guide, _frame_text(node, room), odd)
            self.add("", _continuation(guide), f"  {suffix}", odd)
        # A module's locals are its globals: every import and def, noise next to a frame's.
        if self.with_locals and node.get("locals") and node.get("function") != "<module>":
            self.frame_locals(node, _continuation(guide), odd)

    def frame_locals(self, node: Mapping[str, Any], guide: str, odd: bool) -> None:
        names = list((node.get("locals") or {}).items())
        threads = int((node.get("count") or {}).get("threads", 0))
        for name, values in names[:MAX_LOCALS_SHOWN]:
            self.add("", guide, f"    {name} = {_local_values(values, threads)}", odd)
        if len(names) > MAX_LOCALS_SHOWN:
            self.add("", guide, f"    … {len(names) - MAX_LOCALS_SHOWN} more locals", odd)


def _local_values(values: Sequence[Mapping[str, Any]], threads: int) -> str:
    """``3`` when every thread on the frame held the same value; else each value with how
    many threads held it: ``0 (3) | 1 (2)``, ``3 (3 of 64)`` when the others had no such
    local (another line of the same function)."""
    counted = sum(int(v.get("threads", 0)) for v in values)
    if len(values) == 1 and counted == threads:
        return str(values[0].get("value", ""))
    if len(values) == 1:
        return f"{values[0].get('value', '')} ({counted} of {threads})"
    return " | ".join(f"{v.get('value', '')} ({v.get('threads', 0)})" for v in values)


def _continuation(guide: str) -> str:
    """The guide for the lines after a branch's first: ``├ `` becomes ``│ ``, ``└ ``
    becomes blank, and what is above them stays."""
    if guide.endswith("├ "):
        return guide[:-2] + "│ "
    if guide.endswith("└ "):
        return guide[:-2] + "  "
    return guide


def _cap_guide(guide: str, most: int) -> str:
    """Deep splits must not push the frames off a narrow screen: keep the guide's end."""
    return guide if len(guide) <= most else "…" + guide[-(most - 1):] if most > 1 else ""


def _branch(out: _StackLines, node: Mapping[str, Any], guide: str, odd: bool) -> None:
    """Draw ``node`` and the chain of single children below it at one indentation, then
    each of the chain's last node's children as a branch of its own."""
    while True:
        odd = odd or bool(node.get("odd"))
        out.frame(node, guide, odd)
        guide = _continuation(guide)  # the chain's next frames, under its first
        children = node.get("children") or []
        if len(children) != 1:
            break
        node = children[0]
    for index, child in enumerate(children):
        last = index == len(children) - 1
        _branch(out, child, guide + ("└ " if last else "├ "), odd)


def stacks_view(stacks: Mapping[str, Any], width: int = 120, with_locals: bool = False,
                hub: str = "") -> RenderableType:
    """The ``raydebug stacks`` tree of a ``/api/stacks`` answer (its ``tree``), every line
    at most ``width`` characters, then the processes that did not answer, with why."""
    from rich.console import Group
    from rich.text import Text

    tree = stacks.get("tree") or {}
    root = tree.get("root") or {}
    count = tree.get("count") or {}
    processes = int(count.get("processes", 0))
    threads = int(count.get("threads", 0))
    asked = f" on the hub at {hub}" if hub else ""
    title = f"{processes} process{'es' if processes != 1 else ''}"
    if threads > processes:
        title += f" ({threads} threads)"
    outside = int(count.get("outside", 0))
    missing = tree.get("not_answering") or []
    notes = ([f"{outside} read from outside"] if outside else []) + (
        [f"{len(missing)} did not answer"] if missing else [])
    title += "".join(f", {note}" for note in notes) + ("," if notes and asked else "")
    title += asked
    out = _StackLines(width, max(len(str(processes)), 1), with_locals)
    lines: list[Text] = [Text(_cut(title, width), style="bold", no_wrap=True)]
    roots = root.get("children") or []
    for index, child in enumerate(roots):
        guide = "" if len(roots) == 1 else ("└ " if index == len(roots) - 1 else "├ ")
        _branch(out, child, guide, False)
    lines.extend(out.lines)
    lines.extend(Text(line, style="yellow", no_wrap=True)
                 for line in _unanswered_lines(tree, width))
    if not roots and not missing and not tree.get("no_threads"):
        return Text(f"no live processes{asked}: {HOW_TO_LINK}")
    return Group(*lines)


def _refs(entries: Sequence[Mapping[str, Any]]) -> list[ProcessRef]:
    return [ProcessRef(str(e.get("process", "")), e.get("pid"), str(e.get("host") or ""),
                       e.get("rank")) for e in entries]


def _unanswered_lines(tree: Mapping[str, Any], width: int) -> list[str]:
    """``did not answer: 2 processes: ranks 3, 9: no answer within 2 s``, one line per
    reason (the reason on lines of its own, indented and wrapped at words, when both do not
    fit ``width``: it says what to do, and a cut one said half); then the processes that
    answered with no Python thread."""
    import textwrap

    by_reason: dict[str, list[Mapping[str, Any]]] = defaultdict(list)
    for entry in tree.get("not_answering") or []:
        by_reason[str(entry.get("reason") or "did not answer")].append(entry)
    lines = []
    for reason, entries in by_reason.items():
        who = f"did not answer: {describe_group(_refs(entries), len(entries), name_them=True)}"
        if len(who) + 2 + len(reason) <= width:
            lines.append(f"{who}: {reason}")
        else:
            lines.append(f"{who}:")
            lines.extend(textwrap.wrap(reason, max(width, 20), initial_indent="  ",
                                       subsequent_indent="  ", break_on_hyphens=False))
    empty = tree.get("no_threads") or []
    if empty:
        who = describe_group(_refs(empty), len(empty), name_them=True)
        lines.append(f"no Python thread: {who}")
    return [_cut(line, width) for line in lines]
