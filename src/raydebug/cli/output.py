"""How the CLI talks on stderr: one logical line per message, never wrapped by us (the
terminal wraps it, and a log or a pipe keeps whole sentences)."""

from __future__ import annotations

import os
import sys

import click


def _colour() -> bool:
    return (sys.stderr.isatty() and not os.environ.get("NO_COLOR")
            and os.environ.get("TERM") != "dumb")


def note(text: str) -> None:
    """A remark the user should see next to the command's output (not part of it)."""
    click.echo(f"raydebug: {text}", err=True)


def error(text: str) -> None:
    """A failure: one line, red on a colour terminal."""
    line = f"raydebug: {text}"
    click.echo(click.style(line, fg="red") if _colour() else line, err=True)
