"""The terminal debugger's commands about the session as a whole: where it starts (the
header and the first stop), the process's other threads (``threads``, ``thread N``, and what
is said of them before a prompt), leaving (``quit``, ``kill``) and ``help``.
"""

from __future__ import annotations

from ..errors import CommandError
from . import commands, render, snapshot_rules
from .context import DebuggerContext
from .remote import Stop
from .running import Outcome

# Seconds attaching waits for the session's own thread to stop, when another one of the
# process stopped first.
SESSION_THREAD_WAIT = 2.0


class SessionCommands(DebuggerContext):
    """Mixed into :class:`~.debugger.TerminalDebugger`."""

    # -- the start, and the other threads ---------------------------------------------------

    def start(self) -> None:
        """List the cluster's breakpoints with ours (the hub sets them in the process's
        pydevd), then show the header and where the session is stopped."""
        self.breakpoints.show_cluster(self.cluster_breakpoints(),
                                      self.session.get("remote_root"))
        stop = self.remote.stops.last
        elsewhere = self._select_session_thread(stop)
        self._refresh_stack()
        line = int(self.frames[0].get("line", 0)) if self.frames else None
        header = (snapshot_rules.header(self.session, render.session_what(self.session))
                  if snapshot_rules.is_snapshot(self.session)
                  else render.session_header(self.session, line))
        for text in header:
            self.write(text)
        if elsewhere:
            self.write(elsewhere)
        self._show_stop(context=2)
        self._stops_announced = self.remote.stops.count
        if self.session.get("blocked_in_c"):
            self._blocked_at_count = self.remote.stops.count

    def show_return_from_c(self) -> None:
        """Before a command: if the session's thread, blocked in C when we attached, has
        stopped since on its own (its call returned: after ``p done.set()``, say), show
        where, so the command works on that stop and not on the frames of the wait."""
        stops = self.remote.stops
        if self._blocked_at_count is None or stops.count == self._blocked_at_count:
            return
        if stops.last is None or stops.last.thread_id != self.thread_id:
            return
        self._blocked_at_count = None
        self.write("(its call returned: the thread stopped at its next line)")
        self._show_stop()

    def announce_other_stops(self) -> None:
        """Before a prompt: say which other threads stopped meanwhile (their own
        breakpoint(), in a threaded actor; ``thread N`` switches to one), and which stopped
        ones ran on though we did not resume them."""
        self.show_return_from_c()
        stops = self.remote.stops
        stopped = set(stops.stopped_threads)
        ran_on = sorted(self._others_stopped - stopped)
        self._others_stopped = stopped - {self.thread_id}
        if ran_on:
            self.write(f"(thread {', '.join(map(str, ran_on))} ran on: resumed by something "
                       "other than this prompt)")
        if stops.count == self._stops_announced:
            return
        self._stops_announced = stops.count
        if self._others_stopped:
            self.write(f"(stopped too: thread {', '.join(map(str, sorted(self._others_stopped)))}"
                       "; `thread N` switches)")

    def _select_session_thread(self, stop: Stop | None) -> str:
        """Choose the session's thread, else the first stop's (and that thread's session);
        what to say when that is another thread ("" when not).

        The first stop may be another thread's even when the session's own comes a moment
        later (two threads of a threaded actor released at once, on a loaded machine): its
        stop is waited for, briefly, before settling for another thread."""
        wanted = self.session.get("thread")
        threads = self.remote.request("threads")["threads"]
        by_name = [t["id"] for t in threads if t.get("name") == wanted]
        stopped = [thread for thread in by_name if self.remote.stops.is_stopped(thread)]
        if not stopped and len(by_name) == 1 and self.remote.stops.wait_stopped(
                by_name[0], SESSION_THREAD_WAIT):
            stopped = by_name
        if stopped:
            self.thread_id = stopped[0]
            return ""
        if stop is None:
            return ""
        self.thread_id = stop.thread_id
        name = next((t.get("name") for t in threads if t["id"] == stop.thread_id), "")
        if not wanted or name == wanted:
            return ""
        # The prompt is on that thread: so is the session it runs and ends (or a `c` here
        # would wait for the end of the first session's function, which never runs).
        self._take_session_of(str(name))
        # A paused thread blocked in C (a Ray worker's main loop, a lock) stops only when it
        # returns to Python: the process's stop is another thread's.
        return (f"(thread {wanted} has not stopped (blocked in C?); this is thread "
                f"{stop.thread_id} ({name}) of the same process: `threads` lists them)")

    def do_threads(self, arg: str) -> None:
        threads = self.remote.request("threads")["threads"]
        stopped = {t["id"] for t in threads if self.remote.stops.is_stopped(t["id"])}
        for line in render.threads_lines(threads, self.thread_id, stopped):
            self.write(line)

    def do_thread(self, arg: str) -> None:
        wanted = commands.parse_count(arg, default=-1)
        known = {t["id"]: t.get("name", "") for t in self.remote.request("threads")["threads"]}
        if wanted not in known or not self.remote.stops.is_stopped(wanted):
            raise CommandError(f"thread {wanted} is not stopped (see threads)")
        self._refuse_frameless(wanted)
        if wanted != self.thread_id:
            self._take_session_of(str(known[wanted]))
        self.thread_id = wanted
        self._show_stop()

    # -- leaving, help ----------------------------------------------------------------------

    def do_quit(self, arg: str) -> Outcome:
        if snapshot_rules.is_snapshot(self.session):
            self._detach(None)
            self.write(f"snapshot {self.session.get('id')} closed")
        else:
            self._detach("detached")
        return Outcome.QUIT

    def leave_quietly(self) -> None:
        """Detach, saying nothing (``raydebug attach`` was told to end: SIGTERM)."""
        self._detach(None)

    def do_kill(self, arg: str) -> Outcome:
        if not self.remote.capabilities.get("supportTerminateDebuggee"):
            raise CommandError("this hub does not terminate debuggees (start it with "
                               "--allow-terminate); quit detaches and lets it run on")
        if not self.confirm(f"Kill process {self.session.get('pid')}? (y/n) "):
            return Outcome.STOPPED
        self.remote.request("disconnect", {"terminateDebuggee": True})
        self.write(f"killed process {self.session.get('pid')}")
        return Outcome.KILLED

    def do_help(self, arg: str) -> None:
        for line in commands.help_text(arg, self.width()).splitlines():
            self.write(line)
