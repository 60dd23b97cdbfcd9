"""The `raydebug` command on a real pseudo-terminal (pexpect), as a person meets it:
``raydebug attach`` typed into (:class:`Attach`), and what a command shows at a given width
(:func:`on_a_terminal`)."""

from __future__ import annotations

import contextlib
import os
import re
import select
import signal
import sys
from typing import Any

import pexpect

from devtools.processes import TIMEOUT, HubProcess

PROMPT = "(raydebug) "
LEAVE_PROMPT = "(Enter leaves) "  # after a session ended by itself
# For an Attach's env: the running hint ("(running; Ctrl-C pauses it, q detaches)"), what
# says that the prompt has read `n` while nothing else is said (a thread blocked in C, or
# spinning silently), after half a second, not its five (tests/unit/test_terminal_timing.py
# checks the five).
HINT_SOON = {"RAYDEBUG_RUNNING_HINT_AFTER": "0.5"}

# A job whose compute() stops at its breakpoint(): the first stop, then lines to step and
# break on, a call to step into, and the argument it prints (a name for each process).
JOB = """
import sys

def double(value, factor):
    twice = value * factor
    return twice

def compute(a, b):
    total = a + b
    breakpoint()
    note = "start"  # first stop
    factor = 2  # break here
    scaled = double(total, factor)
    print(f"{sys.argv[1]} result={scaled} total={total}", flush=True)
    return scaled

def main():
    return compute(3, 4)

main()
"""

_COLOURS = re.compile(r"\x1b\[[0-9;]*m")


class Attach:
    """``raydebug attach`` on an 80x24 pseudo-terminal."""

    def __init__(self, hub: HubProcess, *args: str, colour: bool = False,
                 columns: int = 80, env: dict[str, str] | None = None) -> None:
        """``env``: variables set for it on top of this process's (its waits, see
        :mod:`raydebug.terminal.timing`)."""
        env = dict(os.environ, TERM="xterm", **(env or {}))
        if not colour:
            env["NO_COLOR"] = "1"
        self.child = pexpect.spawn(
            sys.executable, ["-m", "raydebug", "attach", "--hub", hub.client_address, *args],
            env=env, encoding="utf-8", timeout=TIMEOUT, dimensions=(24, columns))
        if os.environ.get("RAYDEBUG_TEST_TRANSCRIPT"):  # to see a failing test's screen
            self.child.logfile_read = sys.stdout

    def expect(self, text: str) -> str:
        """Wait for ``text``; return what came before it."""
        self.child.expect_exact(text)
        return str(self.child.before)

    def do(self, command: str) -> str:
        """Type a command; return what it printed before the next prompt (colours
        removed)."""
        self.child.sendline(command)
        self.expect(command)  # the terminal's echo
        return _COLOURS.sub("", self.expect(PROMPT))

    def do_and_end(self, command: str, end: str | list[str]) -> str:
        self.child.sendline(command)
        if isinstance(end, list):
            self.child.expect_exact(end)
            return str(self.child.before)
        return self.expect(end)

    def close(self) -> None:
        end_spawned(self.child)


def end_spawned(child: pexpect.spawn, timeout: float = 30, *, group: bool = False) -> None:
    """Kill a pexpect ``child`` that may still run (SIGKILL; ``group``: its whole process
    group, e.g. a demo and the local Ray it started), wait for its end, then close it.
    pexpect's ``close()`` gives a process about half a second to be gone after its
    signals, then raises "Could not terminate the child": a Ray driver's exit (its memory
    and its threads torn down) took longer on a loaded machine."""
    if child.isalive():
        with contextlib.suppress(ProcessLookupError):
            ended = os.pidfd_open(child.pid)  # readable once the process has exited
            try:
                if group:
                    os.killpg(child.pid, signal.SIGKILL)
                else:
                    child.kill(signal.SIGKILL)
                select.select([ended], [], [], timeout)
            finally:
                os.close(ended)
    child.close()


def start_attach(hub: HubProcess, started: list[Attach], *args: str, **kw: Any) -> Attach:
    """An :class:`Attach` recorded in ``started`` (the ``attach`` fixture's list), which
    closes it at teardown."""
    session = Attach(hub, *args, **kw)
    started.append(session)
    return session


def on_a_terminal(*args: str, columns: int) -> str:
    """What ``raydebug ARGS`` shows on a pseudo-terminal ``columns`` wide (colours off)."""
    child = pexpect.spawn(sys.executable, ["-m", "raydebug", *args], encoding="utf-8",
                          env={**os.environ, "TERM": "xterm", "NO_COLOR": "1"},
                          timeout=TIMEOUT, dimensions=(40, columns))
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 0, child.before
    text = _COLOURS.sub("", str(child.before).replace("\r\n", "\n"))
    return "\n".join(line.rstrip() for line in text.splitlines())
