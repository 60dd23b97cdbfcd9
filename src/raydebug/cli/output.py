"""How the CLI talks on stderr: one logical line per message, never wrapped by us (the
terminal wraps it, and a log or a pipe keeps whole sentences). Without click: ``list --json``
says its errors before click is imported (see :mod:`.list_json`)."""

from __future__ import annotations

import os
import sys

RED, RESET = "\x1b[31m", "\x1b[0m"  # what click.style(..., fg="red") puts around a text


def _colour() -> bool:
    return (sys.stderr.isatty() and not os.environ.get("NO_COLOR")
            and os.environ.get("TERM") != "dumb")


def note(text: str) -> None:
    """A remark the user should see next to the command's output (not part of it)."""
    _say(f"raydebug: {text}")


def error(text: str) -> None:
    """A failure: one line, red on a colour terminal."""
    line = f"raydebug: {text}"
    _say(f"{RED}{line}{RESET}" if _colour() else line)


def _say(line: str) -> None:
    print(line, file=sys.stderr, flush=True)
