"""The terminal debugger's commands that let the debuggee run, and the wait while it runs.

Theory of operation. ``n``, ``s``, ``r``, ``unt`` and ``c`` resume the session's thread (only
that thread: see :mod:`.remote`) and wait for one of three things:

- a ``stopped`` event: the prompt comes back there;
- the hub's ``raydebug/sessionEnded`` for this session: its function returned, so pydevd
  will never stop the thread again (a Ray worker's thread now waits in Ray's core worker).
  As pdb at the end of a program: ``--Return--`` with the value when it is known, the task
  has finished; then the prompt moves to another stopped thread of the process that has a
  frame of the user's code to show if there is one (never to one of Ray's own threads,
  stopped in library code only), else the session is over (with ``--follow``, on to the
  next breakpoint);
- the end of the connection (the process exited).

While waiting, Ctrl-C asks for a pause (DAP ``pause``, which the hub has the agent make as
``raydebug pause`` does: a thread in a C call is brought back or served where it waits); a
second Ctrl-C, ``q`` or Ctrl-D detaches (the process runs on) and ends ``raydebug attach``:
a thread may still not stop, and the user must never be stuck.
"""

from __future__ import annotations

import enum
import time
from typing import Any

from ..errors import CommandError
from ..protocol.control import END_MOVED, END_RAISED, END_RETURNED
from . import commands, render, sources
from .context import DebuggerContext
from .remote import SessionEnd
from .timing import RUNNING_HINT_AFTER

MAX_UNTIL_STEPS = 10_000
PAUSE_RETRY = 1.0  # seconds
PAUSE_GIVE_UP = 3.0  # seconds without a stop after Ctrl-C: say it cannot pause
POLL = 0.1  # seconds between looks at the keyboard while the debuggee runs
EOF = "\x04"  # what poll_input returns at end of input (Ctrl-D)
QUIT_WORDS = ("q", "quit", "exit")


class Outcome(enum.Enum):
    STOPPED = "stopped"  # at a prompt again
    DETACHED = "detached"  # we left; the process runs on
    ENDED = "ended"  # the process (or our connection) is gone
    KILLED = "killed"  # the user killed the process (`kill`): gone, as asked
    LOST = "lost"  # the hub's connection dropped: the process may still be paused
    QUIT = "quit"  # the user asked to leave raydebug attach altogether


class RunningCommands(DebuggerContext):
    """Mixed into :class:`~.debugger.TerminalDebugger`."""

    # -- commands ---------------------------------------------------------------------------

    def do_next(self, arg: str) -> Outcome:
        return self._run("next", {"threadId": self.thread_id})

    def do_step(self, arg: str) -> Outcome:
        return self._run("stepIn", {"threadId": self.thread_id})

    def do_return(self, arg: str) -> Outcome:
        return self._run("stepOut", {"threadId": self.thread_id})

    def do_continue(self, arg: str) -> Outcome:
        # As in pdb: run on, still attached; the next breakpoint() of this process stops
        # here again. Only this thread: the process's other stopped threads stay stopped.
        return self._run("continue", {"threadId": self.thread_id, "singleThread": True})

    def do_c1(self, arg: str) -> Outcome:
        # One thread: `continue` itself here (a group attach's `continue` is of all).
        return self.do_continue(arg)

    def do_until(self, arg: str) -> Outcome:
        frame = self.frame
        if arg:
            line = commands.parse_count(arg)
            if line <= int(frame.get("line", 0)):
                raise CommandError('"until" line number is smaller than current line number')
            point = self.breakpoints.add(sources.frame_path(frame), line, hidden=True)
            self._send_breakpoints(point.file)
            try:
                return self.do_continue("")
            finally:  # stopped elsewhere first: the hidden breakpoint goes all the same
                self.breakpoints.remove(point)
                if self.remote.stops.ended is None:
                    self._send_breakpoints(point.file)
        start_line, depth = int(frame.get("line", 0)), len(self.frames)
        for _ in range(MAX_UNTIL_STEPS):
            outcome = self._run("next", {"threadId": self.thread_id}, show=False)
            if outcome is not Outcome.STOPPED:
                return outcome
            if len(self.frames) != depth or int(self.frames[0].get("line", 0)) > start_line:
                break
        self._show_stop()
        return Outcome.STOPPED

    # -- the wait ---------------------------------------------------------------------------

    def _what_runs(self) -> str:
        """What the wait is for, as said when something is typed meanwhile."""
        return "the process"

    def _run(self, command: str, arguments: dict[str, Any], show: bool = True) -> Outcome:
        """Resume, then wait for the next stop, the end of the session's function, or the
        end of the process (see the module's docstring)."""
        stops = self.remote.stops
        seen, ends_seen = stops.count, len(stops.ends)
        function = self._session_function()
        resumed = str(self.session.get("id"))  # (a new session may be adopted meanwhile)
        interrupted = False
        stops.resuming(self.thread_id)
        try:
            self.remote.request(command, arguments)
        except KeyboardInterrupt:
            interrupted = True  # the request went out all the same: pause after it
        return self._wait(seen, ends_seen, function, resumed, interrupted, show)

    def _wait(self, seen: int, ends_seen: int, function: str, resumed: str,
              interrupted: bool = False, show: bool = True) -> Outcome:
        """The wait of :meth:`_run` once the debuggee runs: for a stop newer than stop
        number ``seen`` or a session end after ``ends_seen`` (``function``, ``resumed``:
        the session's function and id as it was resumed)."""
        stops = self.remote.stops
        started = time.monotonic()
        paused_at: float | None = None  # when Ctrl-C asked for a pause
        last_ask = 0.0
        told_stuck = hinted = False
        asked = False  # a pause was asked of something that runs
        while True:
            # Ctrl-C can land anywhere in a round (while asking for a pause, printing, looking
            # at the keyboard): wherever it lands, it is this loop's, never the prompt's.
            try:
                if interrupted:
                    interrupted = False
                    if paused_at is not None:  # the second Ctrl-C
                        self.write("\n(Ctrl-C again)")
                        self._detach("detached")
                        return Outcome.QUIT
                    paused_at = last_ask = time.monotonic()
                    self.write("\npausing (Ctrl-C; Ctrl-C again or q detaches)")
                    asked = self._ask_pause()
                try:
                    event = stops.wait(seen, timeout=POLL, ends_seen=ends_seen)
                except TimeoutError:
                    now = time.monotonic()
                    typed = self.poll_input()
                    if typed is not None:
                        if typed == EOF or typed.strip() in QUIT_WORDS:
                            self._detach("detached")
                            return Outcome.QUIT
                        self.write(render.error(f"{self._what_runs()} is running: Ctrl-C "
                                                "pauses it, q detaches"))
                    if paused_at is not None and asked:  # (nothing asked: said so)
                        if now - paused_at >= PAUSE_GIVE_UP and not told_stuck:
                            told_stuck = True
                            self.write(render.error(
                                "it does not pause: the thread is outside code the debugger "
                                "can stop in (waiting in Ray, or in a C call); Ctrl-C again or "
                                "q detaches"))
                        elif now - last_ask >= PAUSE_RETRY:
                            # pydevd drops a pause that lands while the step it follows is
                            # still being set up: ask again.
                            last_ask = now
                            asked = self._ask_pause()
                    elif paused_at is None and not hinted and \
                            now - started >= RUNNING_HINT_AFTER:
                        hinted = True  # a silent terminal looks hung: say so, once
                        self.write("(running; Ctrl-C pauses it, q detaches)")
                    continue
                if isinstance(event, SessionEnd):
                    # Its sessionStarted came first on the same connection (the stop may not
                    # have come yet): a session new since the last stop can be ours.
                    self._adopt_new_session()
                    ours = event.reason != END_MOVED and (  # MOVED: a new breakpoint()
                        event.session_id == self.session.get("id")  # of this thread
                        or self._is_running_thread(event.thread))
                    ends_seen += 1  # decided: a Ctrl-C before this looks at it again
                    self._say_returned_before_moving(event, resumed, function)
                    if not ours:
                        continue  # another thread's session, or its stop follows
            except KeyboardInterrupt:
                interrupted = True
                continue
            if event is None:
                self.write(f"session {self.session.get('id')}: {stops.ended}")
                return Outcome.ENDED
            if isinstance(event, SessionEnd):
                return self._session_ended(event, function)
            break
        for end in stops.ends[ends_seen:]:  # came with the stop (which is read first)
            self._say_returned_before_moving(end, resumed, function)
        # One that comes after the stop, with the new call's start, is said before the stop's
        # lines too (_before_stop_lines).
        self._returned_from = (resumed, function, len(stops.ends))
        self._adopt_new_session()
        if event.thread_id != self.thread_id:
            # Another thread stopped first (its own breakpoint()): the prompt goes there,
            # and so does the session it runs and ends.
            names = {t["id"]: t.get("name", "") for t in self.remote.request("threads")["threads"]}
            self._take_session_of(str(names.get(event.thread_id, "")))
        if show:
            self._on_stop(event)  # with the header of a new call (see _before_stop_lines)
        else:
            self._say_late_returns()
            self._announce_new_call()
            self.thread_id = event.thread_id
            self._refresh_stack()
        return Outcome.STOPPED

    def _ask_pause(self) -> bool:
        """Ctrl-C while it runs: ask for the running thread's pause. Whether something was
        asked (False: nothing runs that a pause could stop, said already; not asked again)."""
        self.remote.request("pause", {"threadId": self.thread_id})
        return True

    def _say_returned_before_moving(self, end: SessionEnd, resumed: str, function: str) -> None:
        """The resumed session's function returned and its thread went on into its next
        call (a Ray worker's next task), which paused: what it returned, as pdb says it."""
        if end.reason == END_MOVED and end.returned and end.session_id == resumed:
            self.write(f"--Return-- {function}() -> {end.returned}")

    def _is_running_thread(self, thread_name: str) -> bool:
        """Whether ``thread_name`` names the thread this prompt resumed: its session ended
        even if the prompt did not know that session by its id (it moved to the thread
        without the hub's word of its session)."""
        if not thread_name:
            return False
        names = {t["id"]: t.get("name") for t in self.remote.request("threads")["threads"]}
        if self.thread_id not in names:
            # It has ended since (its function returned, then its thread: a thread the
            # prompt moved to after a pause): an end of a thread that no longer runs is its
            # end, or the prompt said "running" for ever.
            return thread_name not in names.values()
        return bool(names[self.thread_id] == thread_name)

    def _adopt_new_session(self) -> None:
        """After a stop: the session of this thread may be a new one; name it right from now
        on. Said only when it is another call's (see :func:`_another_call`) or a
        post-mortem (the exception is news): the header goes before its stop (a loop's next
        breakpoint() is the same call, said as pdb says it)."""
        for started in self.remote.stops.started:
            if started.get("thread") == self.session.get("thread") and \
                    started.get("id") != self.session.get("id"):
                if _another_call(self.session, started) or started.get("reason") == "exception":
                    self._new_call = started  # its header: who, and which exception
                self.session = started
                self._session_depth = None
        self.remote.stops.started.clear()

    def _before_stop_lines(self) -> None:
        """The stop's stack has come: a new session's start, which reaches the hub on the
        process's control connection while the stop comes on pydevd's, has had a round trip
        through the hub to arrive (under load the stop of another call was shown without its
        header): its header goes first."""
        self._say_late_returns()
        self._adopt_new_session()
        self._announce_new_call()

    def _say_late_returns(self) -> None:
        """What the resumed session's function returned, said by the hub after the stop of
        the thread's next call (it comes on the process's control connection, the stop on
        pydevd's: under load the stop came first and the `--Return--` line was lost)."""
        if self._returned_from is None:
            return
        resumed, function, ends_seen = self._returned_from
        self._returned_from = None
        for end in self.remote.stops.ends[ends_seen:]:
            self._say_returned_before_moving(end, resumed, function)

    def _announce_new_call(self) -> None:
        if self._new_call is not None and self._new_call is self.session:
            for line in render.session_header(self.session):
                self.write(line)
        self._new_call = None

    def _session_function(self) -> str:
        """The function the session paused in: the oldest frame it has stopped in, as far
        as the stacks seen tell (stepping into a callee keeps it, out of it moves it)."""
        if self.frames and (self._session_depth is None
                            or len(self.frames) < self._session_depth):
            self._session_depth = len(self.frames)
            self._session_frame_name = str(self.frames[0].get("name", ""))
        return self._session_frame_name

    def _session_ended(self, end: SessionEnd, function: str) -> Outcome:
        who = f"session {end.session_id}"  # the header said what it is
        if end.reason == END_RETURNED:
            if end.returned:
                self.write(f"--Return-- {function}() -> {end.returned}")
            self.write(f"{who}: {function}() returned; the process runs on")
        elif end.reason == END_RAISED:
            self.write(f"{who}: the exception goes on; the process runs on")
        else:
            self.write(f"{who}: it ran on ({end.reason})")
        self._session_depth = None
        others = sorted(t for t in self.remote.stops.stopped_threads if t != self.thread_id)
        self.remote.stops.stopped_threads.discard(self.thread_id)
        # Only to a thread with a frame to show: one stopped in library code only (a thread
        # of Ray's, a Ray worker between tasks) is nothing the user asked about; with no
        # other, the prompt leaves and the process runs on, those threads too.
        shown = next((t for t in others if self._shows_frames(t)), None)
        if shown is not None:
            return self._switch_thread(shown)
        try:
            self._detach(None)
        except KeyboardInterrupt:  # Ctrl-C as it leaves (the disconnect went out): it has
            return Outcome.QUIT  # left; at a prompt again, the next command met no session
        return Outcome.DETACHED

    def _switch_thread(self, thread_id: int) -> Outcome:
        """Go on with another stopped thread of the process (and its session)."""
        names = {t["id"]: t.get("name", "") for t in self.remote.request("threads")["threads"]}
        name = str(names.get(thread_id, ""))
        session = self.find_session(name)
        if session is not None:
            self.session = session
        self.thread_id = thread_id
        self._session_depth = None
        self.write(f"thread {thread_id} ({name}) is still stopped"
                   + (f": session {session.get('id')}" if session else ""))
        self._show_stop()
        return Outcome.STOPPED


def _another_call(old: dict[str, Any], new: dict[str, Any]) -> bool:
    """Whether session ``new`` of the same thread paused in another call than ``old``: a
    Ray task of its own (a reused worker's next task, an actor's next call: stepping off
    the end of one led into it), else another function."""
    if old.get("task_id") or new.get("task_id"):
        return bool(old.get("task_id") != new.get("task_id"))
    return (old.get("file"), old.get("function")) != (new.get("file"), new.get("function"))
