"""Renders the snapshots the hub keeps (``raydebug list``, ``raydebug snapshots``).

Plain data in (the rows of ``GET /api/snapshots``), text out: no printing, no I/O.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .views import Column, fitted_table, format_age, short_path

if TYPE_CHECKING:
    from rich.console import RenderableType

_DROP_FIRST = ("labels", "thread", "node", "age", "where")


def _what(row: dict[str, Any]) -> str:
    """The Ray task (``Actor.method`` for an actor), else the function that raised."""
    return str(row.get("task_name") or row.get("function") or "")


def _exception(row: dict[str, Any]) -> str:
    return str(row.get("exception") or ("snapshot point" if row.get("reason") == "snapshot"
                                        else ""))


def snapshot_columns(rows: list[dict[str, Any]], now: float | None = None) -> list[Column]:
    """The columns of the snapshots' table, without those empty for every row."""
    places = [f"{row.get('file', '')}:{row.get('line', '')}" for row in rows]
    columns = [
        Column("snapshot", [str(row.get("id", "")) for row in rows], 13),
        Column("task" if any(row.get("task_name") for row in rows) else "function",
               [_what(row) for row in rows], 12),
        Column("node", [str(row.get("node_ip") or row.get("host") or "") for row in rows], 9),
        Column("pid", [str(row.get("pid", "")) for row in rows], 7),
        Column("exception", [_exception(row) for row in rows], 20),
        Column("where", places, 16, short_path),
        Column("age", [format_age(float(row.get("time", 0)), now) for row in rows], 6),
        Column("labels", [", ".join(f"{k}={v}" for k, v in sorted((row.get("labels") or {})
                                                                     .items()))
                          for row in rows], 10),
    ]
    return [column for column in columns if any(column.cells)]


def snapshots_table(rows: list[dict[str, Any]], now: float | None = None,
                    width: int = 120) -> RenderableType:
    """The snapshots kept, newest first, one line each at ``width`` columns; one line
    saying there are none when there are none."""
    from rich.text import Text

    if not rows:
        return Text("no snapshots")
    title = f"{len(rows)} snapshot{'s' if len(rows) != 1 else ''} (read-only: the " \
            "processes ran on)"
    return fitted_table(title, snapshot_columns(rows, now), len(rows), width, _DROP_FIRST)


def cleared_line(removed: list[str]) -> str:
    return f"{len(removed)} snapshot{'s' if len(removed) != 1 else ''} dropped"
