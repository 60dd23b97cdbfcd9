"""What the terminal debugger prints, as pure functions of plain data (tests compare text).

The shapes are pdb's: ``> file(line)function()`` then ``-> source`` at a stop, listings with
``B`` for breakpoints and ``->`` for the current line, ``*** message`` for errors.
"""

from __future__ import annotations

from typing import Any

import pygments
from pygments.formatters import TerminalFormatter
from pygments.lexers import PythonLexer

from ..session import BLOCKED_IN_C


def highlight_lines(source: str) -> list[str]:
    """The lines of ``source`` with ANSI colours (lexed whole, so strings spanning lines
    are coloured right)."""
    coloured: str = pygments.highlight(source, PythonLexer(stripnl=False, ensurenl=True),
                                  TerminalFormatter())
    # A colour may run on past a line's end: reset at each end, so the next line's number
    # (printed before its code) is never coloured.
    return [line + "\x1b[0m" for line in coloured.splitlines()]


def error(message: str) -> str:
    return f"*** {message}"


def evaluate_error(message: str) -> str:
    """pydevd answers a failed evaluate with the whole traceback; pdb shows its last line."""
    lines = [line for line in message.strip().splitlines() if line.strip()]
    return error(lines[-1].strip() if lines else "evaluation failed")


def frame_location(frame: dict[str, Any]) -> str:
    path = (frame.get("source") or {}).get("path") or "<unknown>"
    return f"{path}({frame.get('line')}){frame.get('name', '?')}()"


def stop_lines(frame: dict[str, Any], source_line: str | None) -> list[str]:
    """pdb's two lines at a stop."""
    lines = [f"> {frame_location(frame)}"]
    if source_line is not None:
        lines.append(f"-> {source_line.strip()}")
    return lines


def stack_lines(frames: list[dict[str, Any]], current: int,
                source_line: Any) -> list[str]:
    """``where``: oldest frame first (``frames`` is DAP's order, newest first); ``current``
    indexes ``frames``; ``source_line(frame)`` gives a frame's line or None."""
    lines = []
    for index in reversed(range(len(frames))):
        frame = frames[index]
        marker = ">" if index == current else " "
        lines.append(f"{marker} {frame_location(frame)}")
        text = source_line(frame)
        if text is not None:
            lines.append(f"-> {text.strip()}")
    return lines


def listing(lines: list[str], first: int, last: int, current: int | None,
            breakpoint_lines: set[int], coloured: list[str] | None = None) -> list[str]:
    """Lines ``first``..``last`` (1-based, inclusive) in pdb's layout; ``coloured`` is
    ``lines`` with highlighting, used for the code when given."""
    shown = []
    for number in range(max(first, 1), min(last, len(lines)) + 1):
        code = (coloured or lines)[number - 1].rstrip()
        mark = "B" if number in breakpoint_lines else " "
        arrow = "->" if number == current else "  "
        shown.append(f"{number:>4} {mark}{arrow} {code}")
    return shown


def session_what(session: dict[str, Any]) -> str:
    """What a session paused: ``task f``, ``actor C.m``, or the process's command line."""
    actor, task = session.get("actor_class"), session.get("task_name")
    if actor:
        # Ray names an actor's task "Class.method": say it once.
        return f"actor {task}" if task and task.startswith(f"{actor}.") else f"actor {actor}"
    if task:
        return f"task {task}"
    return " ".join(session.get("argv") or []) or "process"


def session_header(session: dict[str, Any], stopped_line: int | None = None) -> list[str]:
    """Who is paused, and why: shown on attach. ``stopped_line`` is where the arrow is
    (``breakpoint()`` stops at the line after its own)."""
    what = session_what(session)
    node = session.get("node_ip") or session.get("host", "?")
    lines = [f"session {session.get('id')}: {what} on {node}, pid {session.get('pid')}"
             + (f", job {session['job_id']}" if session.get("job_id") else "")]
    if session.get("reason") == "exception":
        lines.append(f"post-mortem: {session.get('exception') or 'an exception'}")
    elif session.get("reason") == "pause":
        # No breakpoint() was called, and the line listed at the pause may be behind the
        # arrow already (a loop goes round): the frame line that follows says where it is.
        lines.append("paused by raydebug pause")
        if session.get("blocked_in_c"):
            lines.append(BLOCKED_IN_C)
    else:
        line = session.get("line")
        next_line = (f", next line {stopped_line}"
                     if stopped_line is not None and stopped_line != line else "")
        what = "cluster breakpoint" if session.get("cluster_breakpoint") else "breakpoint()"
        lines.append(f"{what} at {session.get('file')}:{line}{next_line}")
    return lines


def breakpoint_table(points: list[Any]) -> list[str]:
    if not points:
        return ["No breakpoints."]
    lines = ["Num Type         Disp Enb   Where"]
    for point in points:
        kind = "cluster" if point.cluster else "breakpoint"
        disp = "del " if point.temporary else "keep"
        enabled = "yes" if point.enabled else "no "
        lines.append(f"{point.number:<3} {kind:<12} {disp} {enabled}   {point.where()}")
        if point.condition:
            lines.append(f"\tstop only if {point.condition}")
        if point.hit_condition:
            lines.append(f"\tstop only at hit {point.hit_condition}")
        if point.log_message:
            lines.append(f"\tlog {point.log_message!r} (never stops)")
        if not point.verified:
            lines.append("\tnot verified by the debuggee (no code on that line?)")
    return lines


def threads_lines(threads: list[dict[str, Any]], current: int | None,
                  stopped: set[int]) -> list[str]:
    lines = []
    for thread in threads:
        marker = "*" if thread["id"] == current else " "
        state = "stopped" if thread["id"] in stopped else "running"
        lines.append(f"{marker} {thread['id']:>4}  {thread.get('name', '')}  ({state})")
    return lines


def frame_place(frame: dict[str, Any]) -> str:
    """``step at job.py:12``: a frame's function and where, its file by name only."""
    path = str((frame.get("source") or {}).get("path") or "")
    return f"{frame.get('name', '?')} at {path.rsplit('/', 1)[-1] or '?'}:{frame.get('line')}"


def group_threads_lines(rows: list[tuple[int, str, str]], current: int | None,
                        width: int = 80) -> list[str]:
    """A group attach's ``threads``: ``(id, name, where)`` rows, ``*`` at the current; a
    row wider than ``width`` puts where it is under its name, and cuts the name."""
    lines = []
    for thread_id, name, where in rows:
        head = f"{'*' if thread_id == current else ' '} {thread_id:>4}  {name}"
        if len(head) + 2 + len(where) <= width:
            lines.append(f"{head}  {where}")
            continue
        lines.append(head if len(head) <= width else head[:max(width - 1, 8)] + "…")
        lines.append(f"{'':8}{where}"[:max(width, 16)])
    return lines


def exception_lines(info: dict[str, Any]) -> list[str]:
    """``exceptionInfo``'s answer as the traceback a Python user knows.

    pydevd lists the frames newest first and marks the one it is paused in; Python lists
    them oldest first, and the type name it reports may carry a note of pydevd's own.
    """
    details = info.get("details") or {}
    frames: list[list[str]] = []
    tail: list[str] = []
    for line in (details.get("stackTrace") or "").rstrip("\n").splitlines():
        if line.startswith("  File "):
            frames.append([line.replace(" (Current frame)", "")])
        elif line.startswith(" ") and frames:
            frames[-1].append(line)
        elif line.strip():
            tail.append(line)
    frames.reverse()
    lines = ["Traceback (most recent call last):"] if frames else []
    for frame in frames:
        lines += frame
    raw_name = info.get("exceptionId") or details.get("typeName") or "Exception"
    name = str(raw_name).split()[0]
    last = f"{name}: {info.get('description') or details.get('message') or ''}".rstrip()
    lines += [line for line in tail if line.strip() != last]
    lines.append(last)
    return lines


def switch_banner(number: int, width: int = 80) -> str:
    """The one line --follow prints when it moves to the next session (its header follows)."""
    text = f"── breakpoint {number} "
    return text + "─" * max(0, width - len(text))
