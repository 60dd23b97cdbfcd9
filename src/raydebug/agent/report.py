"""How the agent talks to the user: one line on the process's stderr, where its log is."""

from __future__ import annotations

import re
import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..session import PausedThread

EXCEPTION_LINE = re.compile(r"[\w.]+(: |$)")  # ZeroDivisionError: division by zero
EXCEPTION_WIDTH = 80  # characters of an exception's text in a notice: its line stays one line


def say(message: str) -> None:
    print(f"raydebug: {message}", file=sys.stderr, flush=True)


def pause_place(record: PausedThread) -> str:
    """Where a pause is, for its notices: ``file:line``, then what made it when that is not
    a breakpoint: the exception a post-mortem froze on (``ZeroDivisionError: division by
    zero``, its first line, shortened) or ``raydebug pause``."""
    from ..session import REASON_PAUSE  # (the agent has it imported by now)

    place = f"{record.file}:{record.line}"
    if record.exception:
        # The line that starts with the type's name: a SyntaxError's text starts with where
        # it was and the code it quotes; notes and the rest of a long message follow it.
        first = next((line for line in record.exception.splitlines()
                      if EXCEPTION_LINE.match(line)), "")
        if len(first) > EXCEPTION_WIDTH:
            first = first[:EXCEPTION_WIDTH - 3] + "..."
        return f"{place} on {first}" if first else place
    if record.reason == REASON_PAUSE:
        return f"{place} by raydebug pause"
    return place


def waiting_notice(record: PausedThread, hub_address: str, limit: str = "") -> str:
    """The notice of a pause that waits for a debugger: where, the command that attaches,
    and the hub this process links to, said as its agent port (a worker's log named it
    ``hub: ADDRESS``, which users gave to ``--hub``, where a client port is wanted)."""
    return (f"session {record.id} paused at {pause_place(record)}, waiting for a debugger: "
            f"raydebug attach {record.id} (hub agent port {hub_address}){limit}")
