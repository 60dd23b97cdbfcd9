"""Reading commands and printing, on a terminal or on pipes: the prompt ``raydebug
attach`` shows.

With a terminal on stdin the prompt has line editing, history across runs (in the state
directory) and tab completion (a completer the caller sets). Without one, commands are read
line by line from stdin and echoed, so a piped script reads like a transcript.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import select
import shutil
import struct
import sys
import termios
import threading
from typing import Any

from .. import state_file
from .interrupts import PromptInterrupts
from .running import EOF

PROMPT = "(raydebug) "
HISTORY_LENGTH = 1000


class Terminal:
    """Reading commands and printing, on a terminal or on pipes."""

    def __init__(self) -> None:
        self.interactive = sys.stdin.isatty()
        self.colour = (sys.stdout.isatty() and not os.environ.get("NO_COLOR")
                       and os.environ.get("TERM") != "dumb")
        self._lock = threading.Lock()
        self._at_line_start = True
        self._prompt: str | None = None  # shown, and input() waits for a line
        self._held: dict[Any, str] = {}  # by stream: output after its last newline, held
                                         # while the prompt waits (write_output)
        self.completer: Any = None
        self._history = state_file.path().parent / "attach_history"
        self._interrupts: PromptInterrupts | None = None
        if self.interactive:
            self._setup_readline()
            self._interrupts = PromptInterrupts.install()

    def write(self, line: str) -> None:
        with self._lock:
            if not self._at_line_start:
                sys.stdout.write("\n")
            sys.stdout.write(line + "\n")
            sys.stdout.flush()
            self._at_line_start = True

    def announce_at_prompt(self, line: str) -> bool:
        """Say ``line`` (from another thread) above the prompt if one waits for a line on
        this terminal, drawing it again with what was typed so far; False if none does."""
        with self._lock:
            if self._prompt is None:
                return False
            sys.stdout.write(f"\r\x1b[K{line}\n{self._prompt}{_typed()}")
            sys.stdout.flush()
            return True

    def write_output(self, text: str, category: str) -> None:
        """The debuggee's output, as it arrives (pieces of lines included). While a prompt
        waits for a line, its whole lines go above the prompt, which is drawn again with
        what was typed (a piece of a line waits there for its end, or the prompt's)."""
        stream = sys.stderr if category == "stderr" else sys.stdout
        with self._lock:
            if self._prompt is not None:
                lines, _, self._held[stream] = (self._held.get(stream, "") + text).rpartition(
                    "\n")
                if lines:
                    stream.write(f"\r\x1b[K{lines}\n")
                    stream.flush()
                    sys.stdout.write(f"{self._prompt}{_typed()}")
                    sys.stdout.flush()
                return
            stream.write(text)
            stream.flush()
            self._at_line_start = text.endswith("\n")

    def _write_held(self) -> None:
        """The pieces of lines that came while the prompt waited, once it is gone."""
        with self._lock:
            for stream, text in self._held.items():
                stream.write(text)
                stream.flush()
                self._at_line_start = self._at_line_start and not text
            self._held.clear()

    def read(self, prompt: str = PROMPT) -> str | None:
        """One line; None at end of input (Ctrl-D). Ctrl-C starts the line again."""
        while self.interactive:
            try:
                return self._input(prompt)
            except EOFError:
                self.write("")
                return None
            except KeyboardInterrupt as interrupt:  # as in pdb: a fresh prompt
                if self._interrupts is not None:
                    self._interrupts.taken()
                self.write("")
                if isinstance(interrupt.__context__, EOFError):
                    # Ctrl-C, then Ctrl-D before Python looked at the signal: readline read
                    # the end of input, and the interrupt, raised on the way out of the
                    # prompt, took its place (the Ctrl-D was lost). The last key wins.
                    return None
        with self._lock:
            sys.stdout.write(prompt)
            sys.stdout.flush()
        line = sys.stdin.readline()
        if not line:
            self.write("")
            return None
        self.write(line.rstrip("\n"))  # echo: the transcript shows what ran
        return line.rstrip("\n")

    def wait_for_enter(self, prompt: str) -> str | None:
        """On a terminal: show ``prompt`` and wait for Enter; the line typed before it, or
        None for Ctrl-D or Ctrl-C (either also leaves). Without a terminal: None at once."""
        if not self.interactive:
            return None
        try:
            return self._input(prompt)
        except (EOFError, KeyboardInterrupt) as leaving:
            if isinstance(leaving, KeyboardInterrupt) and self._interrupts is not None:
                self._interrupts.taken()
            self.write("")
            return None

    def _input(self, prompt: str) -> str:
        """``input(prompt)`` on the terminal, every interrupt taken (:mod:`.interrupts`);
        raises EOFError at Ctrl-D, KeyboardInterrupt at Ctrl-C."""
        self._prompt = prompt
        try:
            if _eof_typed_ahead(sys.stdin):
                raise EOFError
            with (self._interrupts.prompt(sys.stdin.fileno()) if self._interrupts
                  else contextlib.nullcontext()):
                return input(prompt)
        finally:
            self._prompt = None
            self._write_held()

    def poll_line(self) -> str | None:
        """A line typed while no prompt is shown (the debuggee runs), without waiting;
        running.EOF for Ctrl-D. Only on a terminal: a piped script's next line is for the
        next prompt."""
        if not self.interactive:
            return None
        with contextlib.suppress(OSError, ValueError):
            if select.select([sys.stdin], [], [], 0)[0]:
                data = os.read(sys.stdin.fileno(), 4096)  # the tty is in line mode here
                return data.decode(errors="replace").strip() if data else EOF
        return None

    def discard_typeahead(self) -> None:
        """Drop what was typed but not read, so that it never reaches the shell after us."""
        if not self.interactive:
            return
        with contextlib.suppress(ImportError, OSError, ValueError):
            import termios

            termios.tcflush(sys.stdin.fileno(), termios.TCIFLUSH)

    @staticmethod
    def width() -> int:
        return shutil.get_terminal_size((80, 24)).columns

    def confirm(self, question: str) -> bool:
        answer = self.read(question)
        return answer is not None and answer.strip().lower() in ("y", "yes")

    def close(self) -> None:
        """Put back the signal handling the prompt changed (see :mod:`.interrupts`)."""
        if self._interrupts is not None:
            self._interrupts.close()
            self._interrupts = None

    def save_history(self) -> None:
        if not self.interactive:
            return
        import readline

        with contextlib.suppress(OSError):
            self._history.parent.mkdir(parents=True, exist_ok=True)
            readline.set_history_length(HISTORY_LENGTH)
            readline.write_history_file(self._history)

    def _setup_readline(self) -> None:
        try:
            import readline
        except ImportError:  # no line editing, still a debugger
            return
        with contextlib.suppress(OSError):
            readline.read_history_file(self._history)
        readline.set_completer_delims(" \t\n`~!@#$%^&*()-=+[{]}\\|;:'\",<>/?")
        readline.set_completer(self._complete)
        readline.parse_and_bind("tab: complete")
        # A Ctrl-D typed between two prompts that lands after _eof_typed_ahead looked, while
        # the terminal is still in line mode, reaches readline as a NUL key once readline
        # takes the terminal into its own mode. NUL (also Ctrl-Space) types a Ctrl-D, which
        # ends the input on an empty line (readline ends it at that key, not at a function
        # a key could be bound to), instead of readline's default, setting the mark.
        readline.parse_and_bind(r'"\C-@": "\C-d"')

    def _complete(self, text: str, state: int) -> str | None:
        if self.completer is None:
            return None
        try:
            matches = self.completer(text)
        except Exception:  # completion must never break the prompt
            return None
        return matches[state] if state < len(matches) else None


def _eof_typed_ahead(stdin: Any) -> bool:
    """Whether a Ctrl-D waits on the terminal ``stdin``, typed while it was in line mode
    between two prompts (just after a Ctrl-C); taken if so.

    In line mode the terminal keeps that Ctrl-D as a mark (readable, no byte: a read
    returns nothing); readline, which reads key by key, finds no key in it and waits on:
    the Ctrl-D was lost. Only the mark is taken: anything typed ahead stays for readline."""
    try:
        fd = stdin.fileno()
        if not termios.tcgetattr(fd)[3] & termios.ICANON:
            return False
        if not select.select([fd], [], [], 0)[0]:  # in line mode: a whole line, or an end
            return False
        waiting = struct.unpack("i", fcntl.ioctl(fd, termios.FIONREAD, b"\0\0\0\0"))[0]
        if waiting:
            return False  # a line typed ahead: readline reads it
        return os.read(fd, 1) == b""  # the mark, taken
    except (OSError, ValueError, struct.error):
        return False


def line_buffer() -> str:
    import readline

    return readline.get_line_buffer()


def _typed() -> str:
    """What was typed at the prompt so far; nothing without readline."""
    try:
        return line_buffer()
    except Exception:  # no readline, or libedit without it
        return ""
