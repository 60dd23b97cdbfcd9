"""Step together (a group session's opt-in ``"stepTogether": true``): a step of one thread
moves the corresponding thread of every other paused process of the group.

Theory of operation. Ranks of one job run the same code, so when one rank steps over a
collective (an all-reduce) the others must step too, or it waits for them forever. The
*corresponding* thread of another process is one stopped in the same function: the same
function name in the same file, at the top of its stack. :class:`StepTogether` remembers
where each stopped thread's top frame is (the hub asks each stopped thread's top frame,
``stackTrace`` with ``levels: 1``, as soon as it stops, and reads the client's own
``stackTrace`` answers), forgets it when the thread runs on, and names the companions of a
step (:meth:`StepTogether.companions`): of each other process, the first stopped thread in
that function. A process whose stop the hub has not read yet is not a companion: it stays
paused, as without step together.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

Where = tuple[str, str]  # (the top frame's source path, or name; its function's name)


def top_of(frames: Sequence[Any]) -> Where | None:
    """Where a ``stackTrace`` answer's top frame is (None: no frame, or not one we read)."""
    if not frames or not isinstance(frames[0], dict):
        return None
    frame = frames[0]
    source = frame.get("source")
    if not isinstance(source, dict):
        source = {}
    path = source.get("path") or source.get("name")
    name = frame.get("name")
    if not isinstance(path, str) or not isinstance(name, str):
        return None
    return (path, name)


class StepTogether:
    """Where each stopped thread of the group is, by process key and the process's thread
    id, and the companions of a step."""

    def __init__(self) -> None:
        self._tops: dict[str, dict[int, Where]] = {}

    def stopped_in(self, key: str, thread: int, frames: Sequence[Any]) -> None:
        """Thread ``thread`` of ``key`` is stopped with ``frames`` on top (a ``stackTrace``
        answer's, from its top)."""
        where = top_of(frames)
        if where is not None:
            self._tops.setdefault(key, {})[thread] = where

    def moved(self, key: str, thread: int | None = None) -> None:
        """``thread`` of ``key`` ran on (None: every thread of it, or it left)."""
        if thread is None:
            self._tops.pop(key, None)
        elif key in self._tops:
            self._tops[key].pop(thread, None)

    def companions(self, key: str, thread: int,
                   stopped: Mapping[str, set[int]]) -> list[tuple[str, int]]:
        """The threads a step of ``thread`` of ``key`` takes with it: of every other
        process, the first of its ``stopped`` threads stopped in the same function."""
        where = self._tops.get(key, {}).get(thread)
        if where is None:
            return []
        found = []
        for other, tops in self._tops.items():
            if other == key:
                continue
            still = stopped.get(other, set())
            for local, its in tops.items():
                if its == where and local in still:
                    found.append((other, local))
                    break
        return found
