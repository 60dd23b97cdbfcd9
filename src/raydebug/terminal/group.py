"""``raydebug attach --group SELECTOR``: every paused process of a group at one prompt, as
the threads of one program, through the hub's group session (``"raydebug": {"group": ...}``).

Theory of operation. The hub serves one DAP session whose threads are those of every paused
process the selector matches (each named ``rank 3 · task · pid 4242 · MainThread``), and
each process that pauses later joins it with a ``stopped`` event; a process that ends leaves
with a ``thread`` exited event (:meth:`.remote.Stops.on_thread`). The prompt speaks pdb's
language, as for one session, with what a program of many threads needs (gdb's all-stop
model, where a thread is a process here):

- ``threads`` lists every thread of every process, stopped ones with where (function,
  file:line); ``thread N`` switches; ``where``, ``p``, ``list``... work on the current one;
- ``c`` continues every stopped thread of the group (DAP ``continue`` without
  ``singleThread``: the hub resumes every process), then waits for the next stop of any
  (a ``breakpoint()`` again, a process that pauses and joins);
- ``c1`` continues the current thread only; the prompt moves to the next stopped thread in
  the hub's order (by rank, then pid), and with none left waits as ``c`` does;
- ``n``, ``s``, ``r``, ``unt`` step the current thread only: the other processes stay paused;
- a process that joins, a thread that stops again and one whose process ended are said in
  one line each before the next prompt;
- ``q`` (Ctrl-D) detaches: every process runs on. No ``kill``: it would end every process.

Ctrl-C while the group runs pauses the current thread's process (as ``raydebug pause``), or,
once that thread has left (its process ended), every process of the group that runs; a
second one, or ``q``, detaches.
"""

from __future__ import annotations

import contextlib
import re
import time
from dataclasses import dataclass, field
from typing import Any

from ..agent.config import parse_address
from ..errors import CommandError, DapRequestError, RaydebugError
from ..shell_command import raydebug_command
from . import commands, render
from .attach import AttachCommand, _leave_on_terminate, complete
from .console import line_buffer
from .debugger import Outcome, TerminalDebugger
from .remote import THREAD_EXITED, Remote, SessionEnd, Stop

# A group attach waits this long for the group's first pause when --timeout is not given.
FIRST_PAUSE_WAIT = 7 * 24 * 3600.0
START_WAIT = 2.0  # seconds the start waits at most for the group's other first stops
START_QUIET = 0.3  # seconds without a new stop after which the start shows the first
PID = re.compile(r"\bpid (\d+)\b")


@dataclass
class GroupDebugger(TerminalDebugger):
    """pdb's commands over a group session (see the module's docstring)."""

    selector: str = ""
    names: dict[int, str] = field(default_factory=dict)  # every thread seen, by id
    _said_stopped: set[int] = field(default_factory=set)  # stopped threads said so
    _seen: set[int] = field(default_factory=set)  # threads seen stopped at some time
    _exits_said: int = 0  # of stops.ends
    _all_ran: bool = False  # `c` let every thread run: the next stop may be any one's

    # -- threads ------------------------------------------------------------------------------

    def _threads(self) -> list[dict[str, Any]]:
        """The group's threads now, in the hub's order (rank, then pid); names kept."""
        threads = list(self.remote.request("threads")["threads"])
        self.names.update({int(t["id"]): str(t.get("name", "")) for t in threads})
        return threads

    def _stopped_in_order(self) -> list[int]:
        stopped = self.remote.stops.stopped_threads
        return [int(t["id"]) for t in self._threads() if int(t["id"]) in stopped]

    def _process_of(self, thread_id: int) -> str:
        """The pid in the thread's name (the hub names every thread with it)."""
        match = PID.search(self.names.get(thread_id, ""))
        return match.group(1) if match else f"thread {thread_id}"

    def _named(self, thread_id: int) -> str:
        return f"thread {thread_id} ({self.names.get(thread_id, '?')})"

    def _move_to(self, thread_id: int) -> None:
        self.thread_id = thread_id
        self.write(self._named(thread_id))
        self._show_stop()

    # -- the start, and what happened meanwhile -----------------------------------------------

    def start(self) -> None:
        # The first stop came; those of the group's other paused processes come within
        # moments, as the hub joins each: until none has come for a moment (bounded).
        stops, deadline = self.remote.stops, time.monotonic() + START_WAIT
        while (left := deadline - time.monotonic()) > 0:
            try:
                if stops.wait(stops.count, timeout=min(START_QUIET, left)) is None:
                    break  # the connection ended
            except TimeoutError:
                break
        stopped = self._stopped_in_order()
        if not stopped and self.remote.stops.last is not None:
            stopped = [self.remote.stops.last.thread_id]
        pids = {match.group(1) for t in stopped
                if (match := PID.search(self.names.get(t, "")))}
        group = f" ({self.selector})" if self.selector else ""
        self.write(f"group session{group}: {_plural(len(stopped), 'thread')} stopped in "
                   f"{_plural(len(pids), 'process', 'processes')}")
        self.write("(`threads`: all of them; `c`: continue all; `c1`: only this one)")
        self._said_stopped = set(stopped)
        self._seen = set(stopped)
        self._exits_said = len(self.remote.stops.ends)
        self._stops_announced = self.remote.stops.count
        if stopped:
            self.thread_id = stopped[0]
            self.write(self._named(self.thread_id))
            self._show_stop(context=2)

    def announce_other_stops(self) -> None:
        """Before a prompt: a line for each thread that stopped meanwhile (``joined`` when
        its process is new to this prompt) and each whose process ended; the current
        thread's leaving moves the prompt to the first thread still stopped."""
        stops = self.remote.stops
        current_left = False
        for end in stops.ends[self._exits_said:]:
            if end.reason == THREAD_EXITED:
                self.write(f"(left: {self._named(int(end.thread))}: its process ended)")
                current_left = current_left or int(end.thread) == self.thread_id
        self._exits_said = len(stops.ends)
        others = self._stopped_in_order() if current_left else []
        if others:  # (its process was killed while the prompt waited for a line)
            self._move_to(others[0])
        stopped = set(stops.stopped_threads)
        fresh = stopped - self._said_stopped - {self.thread_id}
        self._said_stopped = stopped
        if not fresh:
            return
        self._threads()
        for thread_id in sorted(fresh):
            what = "stopped" if thread_id in self._seen else "joined"
            self._seen.add(thread_id)
            line = f"({what}: {self._named(thread_id)}"
            hint = f"; `thread {thread_id}` switches"
            self.write(f"{line}{hint})" if len(line) + len(hint) < self.width() else f"{line})")

    def _on_stop(self, stop: Stop) -> None:
        """A stop the prompt goes to, named first when it is another thread's, or after
        ``c`` (any thread's may come)."""
        if stop.thread_id != self.thread_id or self._all_ran:
            if not self.names.get(stop.thread_id):
                self._threads()
            self.write(self._named(stop.thread_id))
        self._all_ran = False
        self._said_stopped.add(stop.thread_id)
        self._seen.add(stop.thread_id)
        super()._on_stop(stop)

    # -- commands -----------------------------------------------------------------------------

    def do_threads(self, arg: str) -> None:
        rows = []
        for thread in self._threads():
            thread_id = int(thread["id"])
            where = self._where(thread_id) if self.remote.stops.is_stopped(thread_id) \
                else "running"
            rows.append((thread_id, str(thread.get("name", "")), where))
        for line in render.group_threads_lines(rows, self.thread_id, self.width()):
            self.write(line)

    def _where(self, thread_id: int) -> str:
        try:
            frames = self.remote.request("stackTrace", {"threadId": thread_id,
                                                        "levels": 1})["stackFrames"]
        except DapRequestError:
            return "stopped"
        return render.frame_place(frames[0]) if frames else "stopped"

    def do_continue(self, arg: str) -> Outcome:
        # Every stopped thread runs on: a stop of any of them is news from here on.
        for thread_id in list(self.remote.stops.stopped_threads):
            self.remote.stops.resuming(thread_id)
        self._all_ran = True
        return self._run("continue", {"threadId": self.thread_id})

    def _what_runs(self) -> str:
        # `c` lets the whole group run; a step, one thread (the others stay paused).
        return "the group" if self._all_ran else "the thread"

    def do_thread(self, arg: str) -> None:
        wanted = commands.parse_count(arg, default=-1)
        self._threads()
        if wanted not in self.names or not self.remote.stops.is_stopped(wanted):
            raise CommandError(f"thread {wanted} is not stopped (see threads)")
        self._refuse_frameless(wanted)
        self._move_to(wanted)

    def do_c1(self, arg: str) -> Outcome:
        order = self._stopped_in_order()
        at = order.index(self.thread_id) if self.thread_id in order else -1
        others = order[at + 1:] + order[:max(at, 0)]  # the next one by rank, round to the first
        if not others:
            return self._run("continue", {"threadId": self.thread_id, "singleThread": True})
        self.remote.stops.resuming(self.thread_id)
        self.remote.request("continue", {"threadId": self.thread_id, "singleThread": True})
        self.write(f"{self._named(self.thread_id)} runs on")
        self._move_to(others[0])
        return Outcome.STOPPED

    def do_kill(self, arg: str) -> Outcome:
        raise CommandError("kill would end every process of the group; attach to one "
                           "session to kill its process (q detaches: they all run on)")

    # -- the wait's ends ----------------------------------------------------------------------

    def _is_running_thread(self, thread_name: str) -> bool:
        """A thread exit (the only session end here) is the running thread's when it names
        its id (:meth:`.remote.Stops.on_thread`)."""
        return thread_name == str(self.thread_id)

    def _session_ended(self, end: SessionEnd, function: str) -> Outcome:
        """The thread that ran has exited (its process ended): on to the next stopped
        thread, else wait for the next stop of any."""
        self.write(f"{self._named(int(end.thread))} has exited: its process ended")
        self._exits_said = len(self.remote.stops.ends)
        others = self._stopped_in_order()
        if others:
            self._move_to(others[0])
            return Outcome.STOPPED
        self.write("(no thread of the group is stopped: waiting for the next stop; Ctrl-C "
                   "pauses, q detaches)")
        stops = self.remote.stops
        return self._wait(stops.count, len(stops.ends), "", "")

    def _ask_pause(self) -> bool:
        """Pause the current thread's process; when that thread has left (its process
        ended), every process of the group that still runs, as a Ctrl-C stops a program.
        False when nothing of the group runs (said, once)."""
        running = [int(t["id"]) for t in self._threads()
                   if not self.remote.stops.is_stopped(int(t["id"]))]
        if self.thread_id in running:
            targets = [self.thread_id]
        else:  # one thread per process: a pause pauses the whole process
            targets = sorted({self._process_of(t): t for t in reversed(running)}.values())
        if not targets:
            self.write("(no process of the group runs now: waiting for the next stop; "
                       "Ctrl-C again or q detaches)")
            return False
        for thread_id in targets:
            try:
                self.remote.request("pause", {"threadId": thread_id})
            except DapRequestError as error:  # its process ended meanwhile
                self.write(render.error(f"cannot pause {self._named(thread_id)}: {error}"))
        return True

    def _detach(self, what: str | None) -> None:
        """Disconnect: the hub lets every process of the group run on."""
        try:
            self.remote.request("disconnect", {"terminateDebuggee": False}, timeout=5.0)
        except (RaydebugError, TimeoutError):
            pass  # the hub is gone: so is the session
        if what is not None:
            self.write(f"group session {what}; every process of it runs on")


class GroupAttach(AttachCommand):
    """``raydebug attach --group``: the prompt over one group session until it is over."""

    def run_group(self, selector: tuple[str, ...]) -> int:
        """Attach to the group ``selector`` matches (none: every process) and run the
        prompt; the exit status. Raises :class:`RaydebugError` when the hub refuses the
        attach (a selector it cannot parse) or no process pauses within ``--timeout``."""
        with _leave_on_terminate():
            try:
                return self._group(" ".join(selector))
            finally:
                self.terminal.save_history()
                self.terminal.discard_typeahead()
                self.terminal.close()

    def _group(self, text: str) -> int:
        which = text or "every process"
        remote = Remote(self.terminal.write_output, process="a process of the group")
        session = {"id": f"group ({which})"}
        remote.stops.on_ended = lambda reason: self._announce_end(session, reason,
                                                                 "Enter leaves")
        try:
            host, port = parse_address(self.hub, "--hub")
            remote.connect(host, port)
            wait = self.wait_timeout or FIRST_PAUSE_WAIT
            try:
                remote.attach("", self.client_token, timeout=wait, group=text or True,
                              left=self._leaves_waiting,
                              on_slow=lambda: self.terminal.write(
                                  f"waiting for a process of the group ({which}) to pause: "
                                  f"`{raydebug_command()} pause {text or 'SELECTOR'}` "
                                  "pauses those that run (Ctrl-C stops waiting)"))
            except KeyboardInterrupt:
                self.terminal.write("stopped waiting for the group")
                raise
            except TimeoutError:  # (its text is the DAP client's: "no 'stopped' within")
                raise RaydebugError(f"cannot attach to the group ({which}): no process of it "
                                    f"paused within {wait:g} s") from None
            except RaydebugError as error:
                raise RaydebugError(f"cannot attach to the group ({which}): {error}") from None
            debugger = GroupDebugger(remote, session, self.terminal.write,
                                     colour=self.terminal.colour,
                                     confirm=self.terminal.confirm,
                                     poll_input=self.terminal.poll_line,
                                     width=self.terminal.width,
                                     cluster_breakpoints=self._cluster_breakpoints,
                                     selector=text)
            self.terminal.completer = lambda word: complete(debugger, line_buffer(), word)
            debugger.start()
            try:
                outcome = self._prompt_loop(debugger)
            except SystemExit:  # SIGTERM: as `q`, quietly
                debugger.leave_quietly()
                raise
            # (The hub closes the connection after a disconnect too: lost only if it ended.)
            if outcome is Outcome.ENDED and remote.stops.lost:
                self.terminal.write(f"attach again once the hub is back: "
                                    f"{raydebug_command()} attach --hub {self.hub} --group "
                                    f"{text}".rstrip())
                return 1
            return 0
        finally:
            self.terminal.completer = None
            with contextlib.suppress(RaydebugError):
                remote.close()


def _plural(count: int, one: str, many: str = "") -> str:
    return f"{count} {one if count == 1 else many or one + 's'}"
