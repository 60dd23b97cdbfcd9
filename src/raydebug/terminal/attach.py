"""``raydebug attach``: choose a session, attach, and run the prompt until it is over.

Theory of operation. The prompt ``(raydebug) `` is shown only while the debuggee is stopped.
A command that lets it run (``n``, ``c``...) blocks until the next stop, during which Ctrl-C
sends ``pause`` and ``q``, Ctrl-D or a second Ctrl-C detach (:mod:`.running`). A session is
over when the user detaches (``q``, Ctrl-D), when the function it paused in returns, or when
the process goes away; with ``--follow`` the command then waits for the next breakpoint
anywhere in the cluster and attaches to it. Without ``--follow``, a session that ended by
itself leaves through a prompt that waits for Enter: what was typed for a stop that did not
come is read there, never by the shell after us.

The hub's connection can also drop with no word of an end (a hub killed, or restarted by
Ray): the process may still be paused, under the same session id. With ``--follow`` the
command reconnects (bounded, :data:`.timing.RECONNECT_FOR`) and attaches to that session again;
without, it says the command that does.

Reading and printing (line editing, history, piped input) is :mod:`.console`'s.
"""

from __future__ import annotations

import contextlib
import signal
import threading
import time
from collections.abc import Iterator
from typing import Any

from ..agent.config import parse_address
from ..client.hub_api import get_json
from ..errors import (
    HubUnreachableError,
    RaydebugError,
    RemoteProtocolError,
    SessionNotFoundError,
)
from ..session import SessionState
from ..shell_command import raydebug_command
from . import commands, render, snapshot_rules
from .console import PROMPT, Terminal, line_buffer
from .debugger import Outcome, TerminalDebugger
from .remote import KEYS_POLL, Remote
from .running import EOF, QUIT_WORDS
from .timing import RECONNECT_FOR

__all__ = ["PROMPT", "AttachCommand", "Terminal", "complete"]

LEAVE_PROMPT = "(Enter leaves) "  # after a session ended by itself (see _leave_after_end)
POLL_SECONDS = 30.0
RECONNECT_EVERY = 0.5  # seconds between tries while nothing answers
STALE_POLL = 0.5  # seconds
WAITING_ONLY = f"state={SessionState.WAITING.value}"  # the hub's filter of /api/sessions


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


# What the wait for a breakpoint returns when the user typed Ctrl-D or q meanwhile.
STOPPED_WAITING: dict[str, Any] = {"id": "(none: stopped waiting)"}


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
        lost: dict[str, Any] | None = None  # a session the hub's connection dropped under
        try:
            while True:
                try:
                    session = self._next(session_id, lost)
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
                if session is STOPPED_WAITING:
                    return 0
                outcome = self._debug(session, wanted=session_id is not None)
                session_id, lost = None, None
                if outcome is None:
                    continue
                if outcome is Outcome.QUIT:
                    return 0
                if outcome is Outcome.LOST:
                    if self.follow:
                        lost = session  # reconnect, and attach to it again
                        continue
                    self.terminal.write(
                        f"attach to it again once the hub is back: {raydebug_command()} "
                        f"attach --hub {self.hub} {session['id']}")
                    self._leave_after_end()
                    return 1
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
        process went away): on a terminal, a prompt until an empty line (or ``q``, Ctrl-D,
        Ctrl-C). What was typed for the next stop, ahead or as the end was said, is read
        here and said not run: left in the terminal, the shell after us ran it (``p rows``,
        as a shell command)."""
        if self._end_announced:  # said at the prompt, which read the Enter
            return
        while line := (self.terminal.wait_for_enter(LEAVE_PROMPT) or "").strip():
            if line in QUIT_WORDS:
                return
            self.terminal.write(f"not run: {line} (the session is over)")

    def _next(self, session_id: str | None,
              lost: dict[str, Any] | None) -> dict[str, Any] | None:
        """The session to debug next: ``lost`` again once the hub is back with it, else
        the one asked for, else the next breakpoint (None: none in time)."""
        if lost is not None:
            found = self._find_again(lost)
            if found is not None:
                return found
        return self._choose(session_id)

    def _find_again(self, lost: dict[str, Any]) -> dict[str, Any] | None:
        """After the hub's connection dropped under session ``lost`` (``--follow``): the
        session, once the hub answers again and lists it waiting (its process links to the
        restarted hub with its sessions, under the same ids); None when the hub is back
        without it. Raises HubUnreachableError (or RemoteProtocolError) when the hub does
        not answer within :data:`RECONNECT_FOR`. Ctrl-C stops waiting (KeyboardInterrupt)."""
        sessions = self._wait_for_hub()
        deadline = time.monotonic() + RECONNECT_FOR  # its processes link again within seconds
        while True:
            again = next((s for s in sessions if s.get("id") == lost["id"]), None)
            if again is not None and again.get("state") == SessionState.WAITING.value:
                self.terminal.write(f"the hub is back: session {lost['id']} again")
                return again
            remaining = deadline - time.monotonic()
            if again is not None or remaining <= 0:
                self.terminal.write(f"the hub is back, but session {lost['id']} is not "
                                    "waiting there (it ran on, or another client has it)")
                return None
            sessions = self._sessions(f"min={len(sessions) + 1}&timeout={remaining:.1f}")

    def _wait_for_hub(self) -> list[dict[str, Any]]:
        """The hub's sessions once it answers again, after its connection dropped (said
        first): asked every :data:`RECONNECT_EVERY` seconds for :data:`RECONNECT_FOR`.
        Raises HubUnreachableError (or RemoteProtocolError) when it does not answer in
        time; Ctrl-C stops waiting (KeyboardInterrupt)."""
        self.terminal.write(f"reconnecting to the hub at {self.hub} (for up to "
                            f"{RECONNECT_FOR:g} s; Ctrl-C stops)")
        deadline = time.monotonic() + RECONNECT_FOR
        while True:
            try:
                return self._sessions()
            except (HubUnreachableError, RemoteProtocolError):
                if time.monotonic() >= deadline:
                    raise
                time.sleep(RECONNECT_EVERY)  # nothing there yet to wait on

    def _choose(self, session_id: str | None) -> dict[str, Any] | None:
        if session_id is not None:
            sessions = self._sessions()
            exact = [s for s in sessions if s.get("id") == session_id]
            matches = exact or [s for s in sessions
                                if str(s.get("id", "")).startswith(session_id)]
            if len(matches) == 1:
                return matches[0]
            if not matches:  # a process id, as `pause` and `ps` print them
                matches = [s for s in sessions if s.get("process") == session_id]
                chosen = _of_one_process(matches)
                if chosen is not None:
                    return chosen
            snapshot = None if matches else self._snapshot(session_id)
            if snapshot is not None:
                return snapshot
            known = ", ".join(f"{s['id']} ({s.get('state')}, pid {s.get('pid')})"
                              for s in (matches or sessions)) or "none"
            if matches and matches[0].get("process") == session_id:
                raise SessionNotFoundError(f"process {session_id} has {len(matches)} "
                                           f"sessions, none waiting: {known}; give one")
            if matches:
                raise SessionNotFoundError(f"{session_id!r} is the start of {len(matches)} "
                                           f"session ids: {known}; give more of it")
            raise SessionNotFoundError(f"no session {session_id!r} on the hub at {self.hub} "
                                       f"(nor a snapshot); sessions: {known}")
        return self._wait_for_breakpoint()

    def _wait_for_breakpoint(self) -> dict[str, Any] | None:
        """The oldest waiting session not visited yet, as soon as there is one; None after
        ``--timeout``; :data:`STOPPED_WAITING` when Ctrl-D (or ``q``) was typed meanwhile, on
        a terminal (read now: at the first prompt it would detach at once). Following, a hub
        that stops answering is waited for again (see :meth:`_wait_for_hub`, which raises
        when it does not come back)."""
        deadline = None if self.wait_timeout is None else time.monotonic() + self.wait_timeout
        announced = False
        while True:
            try:
                waiting_now = self._sessions(WAITING_ONLY)
            except (HubUnreachableError, RemoteProtocolError):
                if not (self.follow and self._visited):
                    raise  # never reached, or nothing to come back for
                self.terminal.write(f"lost the connection to the hub at {self.hub} (it "
                                    "stopped or restarted)")
                self._wait_for_hub()
                announced = False  # say again that it waits, on the hub that is back
                continue
            fresh = [s for s in waiting_now if s.get("id") not in self._visited]
            if fresh:
                return fresh[0]  # the oldest
            if not announced:
                self.terminal.write(f"waiting for a breakpoint... (hub {self.hub}; Ctrl-C "
                                    "stops waiting)")
                for hint in (self._pause_hint(), self._snapshots_hint()):
                    if hint:
                        self.terminal.write(hint)
                announced = True
            remaining = POLL_SECONDS if deadline is None else deadline - time.monotonic()
            if remaining <= 0:
                self.terminal.write(render.error("no breakpoint was hit in time"))
                return None
            if self._leaves_waiting():
                self.terminal.write("stopped waiting for a breakpoint")
                return STOPPED_WAITING
            if self.terminal.interactive:
                remaining = min(remaining, KEYS_POLL)
            # Long-poll until one more session waits than now; then look again. A session
            # just left (visited) may still be listed for a moment, until its process is
            # gone: then the count can stay the same with a new one in, so look again soon.
            stale = len(waiting_now) > len(fresh)
            with contextlib.suppress(HubUnreachableError, RemoteProtocolError):  # (said above)
                self._sessions(f"{WAITING_ONLY}&min={len(waiting_now) + 1}&timeout="
                               f"{min(remaining, STALE_POLL if stale else POLL_SECONDS):.1f}")

    def _pause_hint(self) -> str | None:
        """Where live processes run and none is paused (a process just linked, a hang): the
        command that stops one here, which a breakpoint nobody hits never will. None when
        there is none to say, or the hub cannot say (an older one)."""
        try:
            running = get_json(self.hub, "/api/processes?now=0", token=self.client_token)
        except (RaydebugError, OSError):
            return None
        pids = [p["pid"] for p in running if isinstance(p, dict) and p.get("live")
                and p.get("state") == "running" and isinstance(p.get("pid"), int)
                ] if isinstance(running, list) else []
        if not pids:
            return None
        command = raydebug_command()
        if len(pids) > 1:
            return (f"{len(pids)} live processes run (none paused): `{command} pause "
                    f"SELECTOR` in another terminal stops those it picks here (`{command} ps` "
                    "lists them)")
        return (f"a live process runs (none paused): `{command} pause pid={pids[0]}` in "
                "another terminal stops it here")

    def _snapshots_hint(self) -> str | None:
        """Where the hub keeps snapshots (a job that failed under ``--snapshots`` did not
        pause: no breakpoint will come of it): the newest, and the commands that read
        them. None when it keeps none, or cannot say (an older hub)."""
        try:
            listing = get_json(self.hub, "/api/snapshots", token=self.client_token)
        except (RaydebugError, OSError):
            return None
        rows = listing.get("snapshots") if isinstance(listing, dict) else None
        rows = [row for row in rows or [] if isinstance(row, dict) and row.get("id")]
        if not rows:
            return None
        newest = max(rows, key=lambda row: float(row.get("time") or 0))
        what = newest.get("exception") or "a snapshot point"
        command = raydebug_command()
        kept = "1 snapshot" if len(rows) == 1 else f"{len(rows)} snapshots"
        return (f"{kept} kept (the newest {newest['id']}: {what}): `{command} attach "
                f"{newest['id']}` reads it, `{command} snapshots` lists them")

    def _leaves_waiting(self) -> bool:
        """Whether Ctrl-D (or ``q``) was typed while nothing is paused yet (on a terminal);
        anything else typed then is said not run."""
        typed = self.terminal.poll_line()
        leaves = typed == EOF or (typed or "").strip() in QUIT_WORDS
        if typed is not None and not leaves:
            self.terminal.write(render.error("nothing is paused yet: no command runs "
                                             "(Ctrl-C or Ctrl-D stops waiting)"))
        return leaves

    def _snapshot(self, wanted: str) -> dict[str, Any] | None:
        """The hub's snapshot whose id is ``wanted`` or, alone, starts with it (its listing
        row, marked ``snapshot``); None when none is, or the hub keeps none (an older one)."""
        try:
            listing = get_json(self.hub, "/api/snapshots", token=self.client_token)
        except RaydebugError:
            return None
        rows = listing.get("snapshots") if isinstance(listing, dict) else None
        rows = [row for row in rows or [] if isinstance(row, dict)]
        exact = [row for row in rows if row.get("id") == wanted]
        matches = exact or [row for row in rows if str(row.get("id", "")).startswith(wanted)]
        return {**matches[0], "snapshot": True} if len(matches) == 1 else None

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
        remote.stops.on_ended = lambda reason: self._announce_end(
            session, reason, "Enter reconnects" if remote.stops.lost and self.follow
            else "Enter leaves")
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
                                        cluster_breakpoints=list if snapshot_rules.is_snapshot(
                                            session) else self._cluster_breakpoints)
            self.terminal.completer = lambda word: complete(debugger, line_buffer(), word)
            debugger.start()
            try:
                outcome = self._prompt_loop(debugger)
            except SystemExit:  # SIGTERM (see _leave_on_terminate): as `q`, quietly
                debugger.leave_quietly()
                raise
            return Outcome.LOST if remote.stops.lost and outcome is Outcome.ENDED else outcome
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

    def _announce_end(self, session: dict[str, Any], reason: str, enter: str) -> None:
        """The session ended (``ray stop``, a kill) while the prompt may wait for a line
        that no command will read: say it now, not at the next command, and what Enter
        does then (``enter``)."""
        self._end_announced = self.terminal.announce_at_prompt(
            f"session {session['id']}: {reason} ({enter})")

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
            if self._end_announced:  # the line that leaves (see _announce_end), not run
                if line.strip():  # (an empty one would repeat the last command)
                    self.terminal.write(f"not run: {line.strip()} (the session is over)")
                return Outcome.ENDED
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


def _of_one_process(sessions: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The session to debug among ``sessions``, all of one process (its id given where a
    session's was expected): the oldest waiting one, else the only one; None when it has
    none, or several and none waiting (the caller names them)."""
    waiting = [s for s in sessions if s.get("state") == SessionState.WAITING.value]
    if waiting:
        return waiting[0]
    return sessions[0] if len(sessions) == 1 else None
