"""How the agent talks to the user: one line on the process's stderr, where its log is."""

from __future__ import annotations

import sys


def say(message: str) -> None:
    print(f"raydebug: {message}", file=sys.stderr, flush=True)
