"""What ``raydebug attach`` does differently on a snapshot: pure functions, no I/O.

A snapshot (``raydebug list`` shows them apart from sessions) is attached to like a session,
and the hub serves it as a read-only DAP session. The prompt then takes pdb's looking
commands as usual (``where``, ``up``, ``down``, ``l``, ``ll``, ``p``, ``locals``,
``exceptions``...); a command that would run or change the process is refused here, saying
why, before anything is sent (:func:`refusal`); ``c`` ends the view as ``q`` does. ``pp``
cannot call ``pprint`` in a process that is gone: it pretty-prints the captured repr when
that repr is a Python literal (:func:`pretty`).
"""

from __future__ import annotations

import ast
import pprint
from typing import Any

# The commands that would run or change the process, and what a snapshot cannot do instead.
_CANNOT = {
    "next": "step", "step": "step", "return": "run to a return", "until": "run",
    "break": "take breakpoints", "tbreak": "take breakpoints",
    "clear": "take breakpoints", "disable": "take breakpoints", "enable": "take breakpoints",
    "kill": "be killed",
}
LOOKING = "where, up, down, l, ll, p, pp, locals, args, exceptions"


def is_snapshot(session: dict[str, Any]) -> bool:
    """Whether the hub's record being debugged is a snapshot's (``raydebug attach`` marks it)."""
    return session.get("snapshot") is True


def refusal(command: str, session: dict[str, Any]) -> str | None:
    """Why ``command`` cannot run on the snapshot ``session``; None when it can."""
    what = _CANNOT.get(command)
    if what is None:
        return None
    return (f"snapshot {session.get('id')} is a capture of one moment: it cannot {what}, "
            f"only show what was captured ({LOOKING}; q or c leaves)")


def header(session: dict[str, Any], what: str) -> list[str]:
    """The lines shown on attaching to a snapshot; ``what`` is what its process ran."""
    node = session.get("node_ip") or session.get("host") or "?"
    first = f"snapshot {session.get('id')}: {what} on {node}, pid {session.get('pid')}"
    if session.get("job_id"):
        first += f", job {session['job_id']}"
    age = session.get("age")
    if isinstance(age, (int, float)):
        first += f", taken {_age(age)} ago"
    if session.get("reason") == "exception":
        second = f"failed: {session.get('exception') or 'an exception'}"
    else:
        second = f"snapshot point at {session.get('file')}:{session.get('line')}"
    return [first, second, f"read-only: the values as captured ({LOOKING}; q leaves)"]


def pretty(result: str) -> list[str]:
    """``pp``'s lines for a captured repr: pretty-printed when it reads as a Python
    literal, else as it is (an object's repr, one cut by the capture: reprlib's ``...``
    would read as Ellipsis)."""
    if "..." in result:
        return result.splitlines() or [result]
    try:
        value = ast.literal_eval(result)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return result.splitlines() or [result]
    return pprint.pformat(value).splitlines()


def _age(seconds: float) -> str:
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.0f} h"
