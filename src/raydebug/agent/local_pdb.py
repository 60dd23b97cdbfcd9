"""The driver's own pdb (``breakpoint()`` in a Ray driver at a terminal), and how another
thread prints without clobbering its prompt.

Theory of operation. A Ray driver prints its workers' log lines (their pause notices among
them) from a thread of its own while pdb's prompt waits for input on the main thread: a line
would land after the prompt and what the user has typed, and the prompt would be gone (the
user types on an empty line under it). :class:`LocalPdb` says when it sits at its prompt;
:func:`print_above_prompt` then clears the prompt's line, lets the other thread print, and
draws the prompt again with the text typed so far (readline's line buffer), so the user
types on where they were.

Ctrl-C at the prompt cancels the line, as in pdb; readline loses one that lands while it is
busy (about 1 in 8 of a line typed and Ctrl-C at once, on a pty), as it did at the prompt of
``raydebug attach``: while its prompt waits, the local pdb takes interrupts the same way
(:mod:`raydebug.terminal.interrupts`), set up for each prompt and put back after it, so that
the driver runs on with its own signal handling.
"""

from __future__ import annotations

import contextlib
import pdb
import sys
import threading
from collections.abc import Callable, Iterator
from typing import Any

from ..terminal.interrupts import PromptInterrupts

CLEAR_LINE = "\r\x1b[K"  # to the line's start, erase to its end

_lock = threading.Lock()
_prompting: LocalPdb | None = None  # the pdb waiting at its prompt, if any


class LocalPdb(pdb.Pdb):
    """pdb, telling :func:`print_above_prompt` while it waits for a command, and taking
    every Ctrl-C at its prompt."""

    def cmdloop(self, intro: str | None = None) -> None:
        with _prompt_interrupts(self.stdin) as interrupts:
            try:
                super().cmdloop(intro)
            except KeyboardInterrupt:  # pdb's caller says --KeyboardInterrupt-- and prompts
                if interrupts is not None:
                    interrupts.taken()
                raise

    def preloop(self) -> None:
        super().preloop()
        _at_prompt(self)

    def precmd(self, line: str) -> str:
        _at_prompt(None)  # a command runs: what it prints goes where it goes
        return super().precmd(line)

    def postcmd(self, stop: bool, line: str) -> bool:
        stop = super().postcmd(stop, line)
        _at_prompt(None if stop else self)
        return stop

    def postloop(self) -> None:
        _at_prompt(None)
        super().postloop()


@contextlib.contextmanager
def _prompt_interrupts(stdin: Any) -> Iterator[PromptInterrupts | None]:
    """Ctrl-C never lost while pdb's loop reads commands from the terminal ``stdin`` (None:
    not a terminal, or the signals are someone else's); put back after it."""
    interrupts = PromptInterrupts.install() if _is_terminal(stdin) else None
    if interrupts is None:
        yield None
        return
    try:
        with interrupts.prompt(stdin.fileno()):
            yield interrupts
    finally:
        interrupts.close()


def _at_prompt(shell: LocalPdb | None) -> None:
    global _prompting
    with _lock:
        _prompting = shell


def print_above_prompt(write: Callable[[], None]) -> None:
    """Run ``write`` (which prints and flushes) so that its lines appear above the local
    pdb's prompt, the prompt drawn again after them; just ``write()`` with no prompt
    waiting on a terminal."""
    with _lock:
        shell = _prompting
        stdout: Any = shell.stdout if shell is not None else None
        if shell is None or not _is_terminal(stdout):
            write()
            return
        stdout.write(CLEAR_LINE)
        stdout.flush()
        try:
            write()
        finally:
            stdout.write(str(shell.prompt) + _typed())
            stdout.flush()


def _is_terminal(stream: Any) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):  # no isatty, or closed
        return False


def _typed() -> str:
    """What the user typed at the prompt so far (readline's buffer; nothing without it)."""
    readline = sys.modules.get("readline")
    if readline is None:
        return ""
    try:
        return str(readline.get_line_buffer())
    except Exception:  # e.g. libedit without it
        return ""
