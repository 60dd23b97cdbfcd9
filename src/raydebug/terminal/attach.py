"""``raydebug attach``: choose a session, attach, and run the prompt until it is over.

Theory of operation. The prompt ``(raydebug) `` is shown only while the debuggee is stopped.
A command that lets it run (``n``, ``c``...) blocks until the next stop, during which Ctrl-C
sends ``pause`` and ``q``, Ctrl-D or a second Ctrl-C detach (:mod:`.running`). A session is
over when the user detaches (``q``, Ctrl-D), when the function it paused in returns, or when
the process goes away; with ``--follow`` the command then waits for the next breakpoint
anywhere in the cluster and attaches to it.

With a terminal on stdin the prompt has line editing, history across runs (in the state
directory) and tab completion of names (DAP ``completions``). Without one, commands are read
line by line from stdin and echoed, so a piped script reads like a transcript.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import select
import shutil
import signal
import struct
import sys
import termios
import threading
import time
from collections.abc import Iterator
from typing import Any

from .. import state_file
from ..agent.config import parse_address
from ..client.hub_api import get_json
from ..errors import (
    HubUnreachableError,
    RaydebugError,
    RemoteProtocolError,
    SessionNotFoundError,
)
from ..session import SessionState
from . import commands, render
from .debugger import Outcome, TerminalDebugger
from .interrupts import PromptInterrupts
from .remote import Remote
from .running import EOF, QUIT_WORDS

PROMPT = "(raydebug) "
LEAVE_PROMPT = "(Enter leaves) "  # after a session ended by itself (see _leave_after_end)
POLL_SECONDS = 30.0
STALE_POLL = 0.5  # seconds
HISTORY_LENGTH = 1000
WAITING_ONLY = f"state={SessionState.WAITING.value}"  # the hub's filter of /api/sessions


class Terminal:
    """Reading commands and printing, on a terminal or on pipes."""

    def __init__(self) -> None:
        self.interactive = sys.stdin.isatty()
        self.colour = (sys.stdout.isatty() and not os.environ.get("NO_COLOR")
                       and os.environ.get("TERM") != "dumb")
        self._lock = threading.Lock()
        self._at_line_start = True
        self._prompt: str | None = None  # shown, and input() waits for a line
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
        """The debuggee's output, as it arrives (pieces of lines included)."""
        stream = sys.stderr if category == "stderr" else sys.stdout
        with self._lock:
            stream.write(text)
            stream.flush()
            self._at_line_start = text.endswith("\n")

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

    def _complete(self, text: str, state: int) -> str | None:
        if self.completer is None:
            return None
        try:
            matches = self.completer(text)
        except Exception:  # completion must never break the prompt
            return None
        return matches[state] if state < len(matches) else None


def complete(debugger: TerminalDebugger, line: str, word: str) -> list[str]:
    """Completions of ``word``, the end of ``line``: a command name while the first word is
    typed, else a Python name in the current frame (DAP ``completions``)."""
    if " " not in line.lstrip() and not line.lstrip().startswith("!"):
        names = [name for name in commands.command_names() if name.startswith(word)]
        if names:
            return names
    command = commands.parse(line)
    expression = command.arg if command is not None else ""
    prefix = expression[: len(expression) - len(word)]  # what readline keeps
    found = []
    for label, start, length in debugger.completions(expression):
        completed = expression[:start] + label + expression[start + length:]
        if completed.startswith(prefix):
            found.append(completed[len(prefix):])
    return found


class AttachCommand:
    """The ``raydebug attach`` loop over one session, or (``follow``) one after another."""

    def __init__(self, hub: str, client_token: str | None, follow: bool,
                 wait_timeout: float | None, terminal: Terminal | None = None) -> None:
        self.hub = hub
        self.client_token = client_token
        self.follow = follow
        self.wait_timeout = wait_timeout
        self.terminal = terminal or Terminal()
        self._visited: set[str] = set()
        self._end_announced = False  # the session's end was said at the prompt already

    def run(self, session_id: str | None) -> int:
        with _leave_on_terminate():
            return self._run(session_id)

    def _run(self, session_id: str | None) -> int:
        try:
            while True:
                try:
                    session = self._choose(session_id)
                except (HubUnreachableError, RemoteProtocolError):
                    if not self._visited:
                        raise  # never reached: the command's error
                    # Followed to the end: the cluster stopped after its last session
                    # (a driver's local Ray ends with the driver), taking the hub along.
                    self.terminal.write(f"the hub at {self.hub} has gone away (it stopped, "
                                        "or its Ray cluster did): no more breakpoints to follow")
                    return 0
                if session is None:
                    return 1
                outcome = self._debug(session, wanted=session_id is not None)
                session_id = None
                if outcome is None:
                    continue
                if outcome is Outcome.QUIT:
                    return 0
                if not self.follow:
                    if outcome is not Outcome.KILLED:
                        self._leave_after_end()
                    return 0
        finally:
            self.terminal.save_history()
            self.terminal.discard_typeahead()
            self.terminal.close()

    def _leave_after_end(self) -> None:
        """The session ended without a word from the user (its function returned, its
        process went away): on a terminal, a prompt until Enter. What was typed for the
        next stop, ahead or as the end was said, is read here and said not run: left in
        the terminal, the shell after us ran it (``p rows``, as a shell command)."""
        if self._end_announced:  # said at the prompt, which read the Enter
            return
        line = self.terminal.wait_for_enter(LEAVE_PROMPT)
        if line and line.strip() not in QUIT_WORDS:
            self.terminal.write(f"not run: {line.strip()} (the session is over)")

    def _choose(self, session_id: str | None) -> dict[str, Any] | None:
        if session_id is not None:
            sessions = self._sessions()
            exact = [s for s in sessions if s.get("id") == session_id]
            matches = exact or [s for s in sessions
                                if str(s.get("id", "")).startswith(session_id)]
            if len(matches) == 1:
                return matches[0]
            known = ", ".join(f"{s['id']} ({s.get('state')}, pid {s.get('pid')})"
                              for s in (matches or sessions)) or "none"
            if matches:
                raise SessionNotFoundError(f"{session_id!r} is the start of {len(matches)} "
                                           f"session ids: {known}; give more of it")
            raise SessionNotFoundError(f"no session {session_id!r} on the hub at {self.hub}; "
                                       f"sessions: {known}")
        return self._wait_for_breakpoint()

    def _wait_for_breakpoint(self) -> dict[str, Any] | None:
        deadline = None if self.wait_timeout is None else time.monotonic() + self.wait_timeout
        announced = False
        while True:
            waiting_now = self._sessions(WAITING_ONLY)
            fresh = [s for s in waiting_now if s.get("id") not in self._visited]
            if fresh:
                return fresh[0]  # the oldest
            if not announced:
                self.terminal.write(f"waiting for a breakpoint... (hub {self.hub}; Ctrl-C "
                                    "stops waiting)")
                announced = True
            remaining = POLL_SECONDS if deadline is None else deadline - time.monotonic()
            if remaining <= 0:
                self.terminal.write(render.error("no breakpoint was hit in time"))
                return None
            # Long-poll until one more session waits than now; then look again. A session
            # just left (visited) may still be listed for a moment, until its process is
            # gone: then the count can stay the same with a new one in, so look again soon.
            stale = len(waiting_now) > len(fresh)
            self._sessions(f"{WAITING_ONLY}&min={len(waiting_now) + 1}"
                           f"&timeout={min(remaining, STALE_POLL if stale else POLL_SECONDS):.1f}")

    def _sessions(self, query: str = "") -> list[dict[str, Any]]:
        path = "/api/sessions" + (f"?{query}" if query else "")
        sessions = get_json(self.hub, path, timeout=POLL_SECONDS + 10, token=self.client_token)
        return sessions if isinstance(sessions, list) else []

    def _debug(self, session: dict[str, Any], wanted: bool) -> Outcome | None:
        """Debug one session until it is over; None when it could not be attached."""
        self._visited.add(str(session["id"]))
        if self.follow and len(self._visited) > 1:
            self.terminal.write(render.switch_banner(len(self._visited),
                                                     self.terminal.width()))
        pid = session.get("pid")
        remote = Remote(self.terminal.write_output,
                        process=f"process {pid}" if pid else "the process")
        remote.stops.on_ended = lambda reason: self._announce_end(session, reason)
        try:
            host, port = parse_address(self.hub, "--hub")
            remote.connect(host, port)
            try:
                remote.attach(str(session["id"]), self.client_token,
                              on_slow=lambda: self.terminal.write(_not_stopped_yet(session)))
            except KeyboardInterrupt:
                self.terminal.write(f"stopped waiting for session {session['id']}; "
                                    "its process runs on")
                raise
            except (RaydebugError, TimeoutError) as error:
                # str(): a TimeoutError says nothing of itself, and is true all the same.
                why = str(error) or ("it did not stop in time (a thread blocked in C stops "
                                     "only when it returns to Python)")
                if wanted:
                    raise RaydebugError(f"cannot attach to {session['id']}: {why}") from None
                # Taken by another client, or gone, since we looked: choose again.
                self.terminal.write(render.error(f"cannot attach to {session['id']}: {why}"))
                return None
            debugger = TerminalDebugger(remote, session, self.terminal.write,
                                        colour=self.terminal.colour,
                                        confirm=self.terminal.confirm,
                                        poll_input=self.terminal.poll_line,
                                        find_session=lambda thread: self._session_of(
                                            session, thread),
                                        width=self.terminal.width,
                                        cluster_breakpoints=self._cluster_breakpoints())
            self.terminal.completer = lambda word: complete(debugger, _line_buffer(), word)
            debugger.start()
            try:
                return self._prompt_loop(debugger)
            except SystemExit:  # SIGTERM (see _leave_on_terminate): as `q`, quietly
                debugger.leave_quietly()
                raise
        finally:
            self.terminal.completer = None
            remote.close()

    def _cluster_breakpoints(self) -> list[dict[str, Any]]:
        """The hub's cluster breakpoints, or none if it cannot say now (an older hub)."""
        try:
            answer = get_json(self.hub, "/api/breakpoints", token=self.client_token)
        except (RaydebugError, OSError):
            return []
        listing = answer.get("breakpoints") if isinstance(answer, dict) else None
        return [entry for entry in listing or [] if isinstance(entry, dict)]

    def _session_of(self, attached: dict[str, Any], thread: str) -> dict[str, Any] | None:
        """The hub's session of the thread named ``thread`` in the attached process."""
        try:
            sessions = self._sessions()
        except (RaydebugError, OSError):
            return None
        return next((s for s in sessions if s.get("process") == attached.get("process")
                     and s.get("thread") == thread), None)

    def _announce_end(self, session: dict[str, Any], reason: str) -> None:
        """The session ended (``ray stop``, a kill) while the prompt may wait for a line
        that no command will read: say it now, not at the next command."""
        self._end_announced = self.terminal.announce_at_prompt(
            f"session {session['id']}: {reason} (Enter leaves)")

    def _prompt_loop(self, debugger: TerminalDebugger) -> Outcome:
        self._end_announced = False
        while True:
            if debugger.remote.stops.ended is not None:
                if not self._end_announced:
                    self.terminal.write(f"session {debugger.session['id']}: "
                                        f"{debugger.remote.stops.ended}")
                return Outcome.ENDED
            debugger.announce_other_stops()
            line = self.terminal.read()
            if line is None:  # Ctrl-D: detach, and stop following
                debugger.do_quit("")
                return Outcome.QUIT
            outcome = debugger.execute(line)
            if outcome is not Outcome.STOPPED:
                return outcome


@contextlib.contextmanager
def _leave_on_terminate() -> Iterator[None]:
    """SIGTERM (``make demo`` ending, a supervisor, ``kill``) leaves as ``q`` does, quietly:
    the session detached, the terminal put back (Python's default dies at once, leaving it
    without echo when the prompt had it), exit status 143. Ctrl-C would be a pause."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def leave(signum: int, frame: object) -> None:
        raise SystemExit(128 + signum)

    previous = signal.signal(signal.SIGTERM, leave)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def _not_stopped_yet(session: dict[str, Any]) -> str:
    """Why attaching to ``session`` waits: its thread has not stopped (yet)."""
    where = f" in {session['source']}" if session.get("source") else ""
    at = (f" at {session.get('file')}:{session.get('line')}" if session.get("file") else "")
    return (f"session {session['id']} has not stopped yet: its thread waits{where}{at}, "
            "and a thread blocked in C stops only when it returns to Python "
            "(Ctrl-C stops waiting; the process runs on)")


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


def _line_buffer() -> str:
    import readline

    return readline.get_line_buffer()


def _typed() -> str:
    """What was typed at the prompt so far; nothing without readline."""
    try:
        return _line_buffer()
    except Exception:  # no readline, or libedit without it
        return ""
