"""A group session's output: each process's lines whole, each saying who wrote it.

Many processes write to one client's console. A process's ``print`` reaches it in pieces
(pydevd sends each ``write`` as an ``output`` event: ``rank``, `` ``, ``2``, ``\\n``), and
pieces of different processes arrive interleaved, so a line passed on piece by piece would
mix processes mid-line. :class:`GroupOutput` holds each process's unfinished line, per
category (``stdout``, ``stderr``, ``console``: each has its own line), until its newline
comes, then sends it whole with the process's prefix (``[rank N pid P] ``, :func:`prefixed`).

A held line is sent unfinished when it must not wait longer: its process stops (the prompt
that follows would hide it), leaves the group, or has held it for :data:`PARTIAL_LINE_WAIT`
(``input("name? ")`` waits for no newline). No clock here: the caller says what time it is
(``now``) and, when :meth:`GroupOutput.deadline` is not None, calls
:meth:`GroupOutput.due` then. The client's line left unfinished that way is ended (a
newline) before another process's text; its own next text goes on it without a prefix.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .group_rewrite import Member

PARTIAL_LINE_WAIT = 0.2  # seconds an unfinished line is held before it is shown as it is


def prefixed(text: str, prefix: str, at_line_start: bool) -> str:
    """``text`` with ``prefix`` before each line that starts in it (the first one only when
    ``at_line_start``: the text before went on without a newline)."""
    lines = text.split("\n")
    last = len(lines) - 1
    return "\n".join(prefix + line if (index or at_line_start) and (line or index < last)
                     else line for index, line in enumerate(lines))


@dataclass
class _Held:
    """An unfinished line of ``member``'s: ``text`` since ``since``; ``body``: its last
    piece's event body (what else it said: ``source``, ``line``...)."""

    member: Member
    text: str
    since: float
    body: dict[str, Any]


class GroupOutput:
    """Every process's unfinished lines, and the client's own unfinished line's writer."""

    def __init__(self) -> None:
        self._held: dict[tuple[str, str], _Held] = {}  # by (process key, category)
        self._open: tuple[str, str] | None = None  # whose text the client's line ends with

    def piece(self, member: Member, body: dict[str, Any], now: float
              ) -> list[tuple[Member, dict[str, Any]]]:
        """An ``output`` event's body from ``member``: the bodies the client is sent now
        (its whole lines; none while the line goes on), each with the member it is of."""
        category = body.get("category", "console")
        text = body.get("output")
        if category == "telemetry" or not isinstance(text, str):
            return []
        held = self._held.pop((member.key, category), None)
        whole = text if held is None else held.text + text
        cut = whole.rfind("\n") + 1
        if whole[cut:]:
            since = held.since if held is not None and not cut else now
            self._held[(member.key, category)] = _Held(member, whole[cut:], since, body)
        return [self._sent(member, body, whole[:cut])] if cut else []

    def flush(self, key: str) -> list[tuple[Member, dict[str, Any]]]:
        """Process ``key`` stops or leaves: its unfinished lines are sent as they are."""
        return self._send_held([where for where in self._held if where[0] == key])

    def due(self, now: float) -> list[tuple[Member, dict[str, Any]]]:
        """The unfinished lines held :data:`PARTIAL_LINE_WAIT` by ``now``, sent as they are."""
        return self._send_held([where for where, held in self._held.items()
                                if held.since + PARTIAL_LINE_WAIT <= now])

    def deadline(self) -> float | None:
        """When :meth:`due` next has a line to send (None: nothing is held)."""
        if not self._held:
            return None
        return min(held.since for held in self._held.values()) + PARTIAL_LINE_WAIT

    def _send_held(self, where: list[tuple[str, str]]) -> list[tuple[Member, dict[str, Any]]]:
        held = [self._held.pop(place) for place in where]
        return [self._sent(line.member, line.body, line.text) for line in held]

    def _sent(self, member: Member, body: dict[str, Any], text: str
              ) -> tuple[Member, dict[str, Any]]:
        """``text`` of ``member``'s as the client is sent it: prefixed where its lines start;
        first a newline that ends another's unfinished line on the client's console."""
        category = body.get("category", "console")
        goes_on = self._open == (member.key, category)
        shown = prefixed(text, member.prefix, not goes_on)
        if self._open is not None and not goes_on:
            shown = "\n" + shown
        self._open = None if text.endswith("\n") else (member.key, category)
        return member, {**body, "output": shown}
