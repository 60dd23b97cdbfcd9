"""The terminal debugger's command flow in memory: typed lines in, DAP requests and printed
lines out, through the Debuggee seam (a scripted process instead of a hub and a pydevd).

The real thing (a real hub, a real debugpy, a pty) is tested in tests/integration/
test_terminal*.py; these show what each command asks of the debuggee and what it prints.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from raydebug.errors import DapRequestError
from raydebug.protocol import Event
from raydebug.shell_command import raydebug_command
from raydebug.terminal.debugger import Outcome, TerminalDebugger
from raydebug.terminal.remote import DEFAULT_TIMEOUT, Debuggee, Stops
from raydebug.terminal.sources import fetch_expression

PATH = "/work/app.py"
SOURCE = "def f(n):\n    x = n * 2\n    y = x + 1\n    return y\n\n\nf(3)\n"
SESSION = {"id": "s1", "pid": 42, "host": "node1", "file": PATH, "line": 2,
           "function": "f", "thread": "MainThread", "argv": ["app.py"]}


class ScriptedDebuggee:
    """One process, paused at a breakpoint() in f() of PATH (line 2) on thread 1, whose
    variables are ``values``. ``next`` moves one line down; what ``continue`` does is
    ``on_continue`` (the test says). Every request is recorded, in order."""

    def __init__(self) -> None:
        self.stops = Stops()
        self.capabilities: dict[str, Any] = {"supportTerminateDebuggee": False}
        self.requests: list[tuple[str, dict[str, Any]]] = []
        self.line = 2
        self.values = {"n": "3", "x": "6"}
        self.on_continue: Callable[[], None] = lambda: self.stop_at(4)
        self._seq = 0
        self.stop_at(2, "breakpoint")

    def request(self, command: str, arguments: dict[str, Any] | None = None,
                timeout: float = DEFAULT_TIMEOUT) -> dict[str, Any]:
        arguments = arguments or {}
        self.requests.append((command, arguments))
        body: dict[str, Any] = getattr(self, f"{command}_request")(arguments)
        return body

    # -- what the test scripts ---------------------------------------------------------------

    def stop_at(self, line: int, reason: str = "step", hit: tuple[int, ...] = ()) -> None:
        self.line = line
        self._seq += 1
        self.stops.on_stopped(Event(seq=self._seq, event="stopped", body={
            "threadId": 1, "reason": reason, "hitBreakpointIds": list(hit)}))

    def end_session(self, reason: str, returned: str = "") -> None:
        self._seq += 1
        self.stops.on_session_event(Event(seq=self._seq, event="raydebug/sessionEnded", body={
            "session": SESSION["id"], "thread": SESSION["thread"], "reason": reason,
            "returned": returned}))

    # -- the requests, answered as pydevd does ------------------------------------------------

    def threads_request(self, arguments: dict[str, Any]) -> dict[str, Any]:
        return {"threads": [{"id": 1, "name": "MainThread"}]}

    def stackTrace_request(self, arguments: dict[str, Any]) -> dict[str, Any]:
        return {"stackFrames": [
            {"id": 10, "name": "f", "line": self.line, "source": {"path": PATH}},
            {"id": 11, "name": "<module>", "line": 7, "source": {"path": PATH}}]}

    def evaluate_request(self, arguments: dict[str, Any]) -> dict[str, Any]:
        expression = arguments["expression"]
        if expression == fetch_expression(PATH):
            return {"result": repr(SOURCE)}
        if expression in self.values:
            return {"result": self.values[expression]}
        raise DapRequestError("evaluate", "Traceback (most recent call last):\n  ...\n"
                              f"NameError: name {expression!r} is not defined")

    def next_request(self, arguments: dict[str, Any]) -> dict[str, Any]:
        self.stop_at(self.line + 1)
        return {}

    def continue_request(self, arguments: dict[str, Any]) -> dict[str, Any]:
        self.on_continue()
        return {"allThreadsContinued": False}

    def setBreakpoints_request(self, arguments: dict[str, Any]) -> dict[str, Any]:
        return {"breakpoints": [{"id": 100 + index, "verified": True, "line": point["line"]}
                                for index, point in enumerate(arguments["breakpoints"])]}

    def disconnect_request(self, arguments: dict[str, Any]) -> dict[str, Any]:
        return {}


def attached() -> tuple[ScriptedDebuggee, TerminalDebugger, list[str]]:
    """A debugger that has shown its first stop; the requests and lines of that forgotten."""
    debuggee = ScriptedDebuggee()
    seam: Debuggee = debuggee  # typed as the seam: all the debugger may use
    said: list[str] = []
    debugger = TerminalDebugger(seam, dict(SESSION), said.append)
    debugger.start()
    assert said[:2] == ["session s1: app.py on node1, pid 42", f"breakpoint() at {PATH}:2"]
    assert "   2  -> " + "    x = n * 2".rstrip() in said
    said.clear()
    debuggee.requests.clear()
    return debuggee, debugger, said


def commands_sent(debuggee: ScriptedDebuggee) -> list[str]:
    return [command for command, _ in debuggee.requests]


def test_next_then_print_then_continue_to_a_stop():
    debuggee, debugger, said = attached()

    assert debugger.execute("n") is Outcome.STOPPED
    assert debuggee.requests[0] == ("next", {"threadId": 1})
    assert commands_sent(debuggee) == ["next", "stackTrace"]  # the source is known already
    assert said == [f"> {PATH}(3)f()", "-> y = x + 1"]

    said.clear()
    debuggee.requests.clear()
    assert debugger.execute("p x") is Outcome.STOPPED
    assert debuggee.requests == [("evaluate", {"expression": "x", "context": "repl",
                                               "frameId": 10})]
    assert said == ["6"]

    said.clear()
    debuggee.requests.clear()
    assert debugger.execute("c") is Outcome.STOPPED
    assert debuggee.requests[0] == ("continue", {"threadId": 1, "singleThread": True})
    assert said == [f"> {PATH}(4)f()", "-> return y"]


def test_an_empty_line_repeats_the_step_and_errors_read_as_pdb_prints_them():
    debuggee, debugger, said = attached()
    debugger.execute("n")
    debugger.execute("")
    assert commands_sent(debuggee).count("next") == 2
    assert said[-2:] == [f"> {PATH}(4)f()", "-> return y"]

    said.clear()
    assert debugger.execute("p nope") is Outcome.STOPPED
    assert said == ["*** NameError: name 'nope' is not defined"]
    assert debugger.execute("frame x") is Outcome.STOPPED
    assert said[-1] == "*** expected a number, got 'x'"


def test_a_temporary_breakpoint_is_sent_hit_and_deleted():
    debuggee, debugger, said = attached()
    debugger.execute("tbreak 4")
    assert debuggee.requests == [("setBreakpoints", {"source": {"path": PATH},
                                                     "breakpoints": [{"line": 4}]})]
    assert said == [f"Temporary breakpoint 1 at {PATH}:4"]

    said.clear()
    debuggee.requests.clear()
    debuggee.on_continue = lambda: debuggee.stop_at(4, "breakpoint", hit=(100,))
    assert debugger.execute("c") is Outcome.STOPPED
    assert debuggee.requests[:2] == [
        ("continue", {"threadId": 1, "singleThread": True}),
        ("setBreakpoints", {"source": {"path": PATH}, "breakpoints": []})]
    assert said == [f"Deleted breakpoint 1 at {PATH}:4", f"> {PATH}(4)f()", "-> return y"]


def test_continue_past_the_functions_return_ends_the_session_and_detaches():
    debuggee, debugger, said = attached()
    debuggee.on_continue = lambda: debuggee.end_session("returned", returned="7")
    assert debugger.execute("c") is Outcome.DETACHED
    assert commands_sent(debuggee) == ["continue", "disconnect"]
    assert debuggee.requests[-1] == ("disconnect", {"terminateDebuggee": False})
    assert said == ["--Return-- f() -> 7", "session s1: f() returned; the process runs on"]


def test_the_process_exiting_while_it_runs_ends_the_session():
    debuggee, debugger, said = attached()
    debuggee.on_continue = lambda: debuggee.stops.on_end("the process exited")
    assert debugger.execute("c") is Outcome.ENDED
    assert said == ["session s1: the process exited"]


def test_quit_detaches_and_kill_needs_the_hubs_leave():
    debuggee, debugger, said = attached()
    assert debugger.execute("kill") is Outcome.STOPPED
    assert said == ["*** this hub does not terminate debuggees (start it with "
                    "--allow-terminate); quit detaches and lets it run on"]
    assert debuggee.requests == []
    assert debugger.execute("q") is Outcome.QUIT
    assert debuggee.requests == [("disconnect", {"terminateDebuggee": False})]
    assert said[-1] == "session s1 detached; the process runs on"


def test_a_session_whose_thread_has_not_stopped_says_whose_stop_it_shows():
    """`raydebug pause` of a process whose main thread is blocked in C: attaching to that
    thread's session finds only another thread stopped. The prompt is that thread's: said,
    not shown under the first session's name as if it were its stop."""
    debuggee = ScriptedDebuggee()
    said: list[str] = []
    blocked = dict(SESSION, thread="Blocked", reason="pause")
    TerminalDebugger(debuggee, blocked, said.append).start()
    assert any("thread Blocked has not stopped" in line and "thread 1 (MainThread)" in line
               for line in said), said


class ThreadedActor(ScriptedDebuggee):
    """A threaded actor's process: two calls of f() paused in threads 3 (Dummy-1, session
    s3) and 4 (Dummy-2, session s4). ``continue`` ends the continued thread's session (its
    function returned), as the agent says it."""

    SESSIONS = {3: dict(SESSION, id="s3", thread="Dummy-1"),
                4: dict(SESSION, id="s4", thread="Dummy-2")}

    def __init__(self, first: int) -> None:
        self.stops = Stops()
        self.capabilities = {"supportTerminateDebuggee": False}
        self.requests = []
        self.line = 2
        self.values = {"n": "3", "x": "6"}
        self._seq = 0
        self.stop_thread(first)

    def stop_thread(self, thread_id: int) -> None:
        self._seq += 1
        self.stops.on_stopped(Event(seq=self._seq, event="stopped", body={
            "threadId": thread_id, "reason": "breakpoint"}))

    def threads_request(self, arguments: dict[str, Any]) -> dict[str, Any]:
        return {"threads": [{"id": 1, "name": "MainThread"}, {"id": 3, "name": "Dummy-1"},
                            {"id": 4, "name": "Dummy-2"}]}

    def continue_request(self, arguments: dict[str, Any]) -> dict[str, Any]:
        session = self.SESSIONS[arguments["threadId"]]
        self._seq += 1
        self.stops.on_session_event(Event(seq=self._seq, event="raydebug/sessionEnded", body={
            "session": session["id"], "thread": session["thread"], "reason": "returned"}))
        return {"allThreadsContinued": False}


def run_bounded(debugger: TerminalDebugger, line: str) -> Outcome:
    """``debugger.execute(line)``, failing the test (not hanging it) after 10 s."""
    import threading

    outcome: list[Outcome] = []
    runner = threading.Thread(target=lambda: outcome.append(debugger.execute(line)),
                              daemon=True)
    runner.start()
    runner.join(10.0)
    assert outcome, f"{line!r} still waits for the end of a session that will never end"
    return outcome[0]


def test_attaching_waits_for_the_sessions_own_thread_when_another_stopped_first():
    """Two calls of a threaded actor released at once: the other thread's stop came first
    (a loaded machine). The prompt is the attached session's thread, whose `c` ends it."""
    import threading

    actor = ThreadedActor(first=3)
    said: list[str] = []
    debugger = TerminalDebugger(actor, dict(actor.SESSIONS[4]), said.append)
    threading.Timer(0.2, actor.stop_thread, (4,)).start()  # its own stop, a moment later
    debugger.start()
    assert debugger.thread_id == 4 and not any("has not stopped" in line for line in said)
    assert run_bounded(debugger, "c") is Outcome.STOPPED  # on to thread 3, still stopped
    assert "session s4: f() returned; the process runs on" in said
    assert debugger.thread_id == 3


def test_a_prompt_on_another_thread_than_its_sessions_ends_that_threads_session():
    """The session's thread never stops (blocked in C) and the prompt shows another
    thread; or `thread N` moved it. Continuing that thread ends *its* session, which the
    prompt must recognise (it waited, "running", for the first session's end, for ever)."""
    actor = ThreadedActor(first=3)
    said: list[str] = []
    sessions = {s["thread"]: s for s in actor.SESSIONS.values()}
    blocked = dict(SESSION, id="s9", thread="Blocked")
    debugger = TerminalDebugger(actor, blocked, said.append,
                                find_session=lambda name: sessions.get(name))
    debugger.start()
    assert debugger.thread_id == 3 and debugger.session["id"] == "s3"
    assert run_bounded(debugger, "c") is Outcome.DETACHED
    assert "session s3: f() returned; the process runs on" in said

    actor = ThreadedActor(first=3)
    actor.stop_thread(4)
    said.clear()
    debugger = TerminalDebugger(actor, dict(actor.SESSIONS[3]), said.append)  # no hub
    debugger.start()
    assert debugger.execute("thread 4") is Outcome.STOPPED
    assert run_bounded(debugger, "c") is Outcome.STOPPED  # back to thread 3
    assert "session s4: f() returned; the process runs on" in said


class PausedProcess(ThreadedActor):
    """`raydebug pause` of a threaded actor: threads 3 and 4 suspended before the client
    chose one stop per thread, so pydevd keeps its single-notification bookkeeping for them
    (measured): resuming one also says allThreadsContinued, and 0.5 s after a pause it
    says again that a thread stopped long ago has stopped. ``continue`` runs thread 3 on;
    ``pause`` stops it, after the stale word of thread 4 when ``stale_first``."""

    def __init__(self) -> None:
        super().__init__(first=3)
        self.stop_thread(4)
        self.stale_first = False

    def continue_request(self, arguments: dict[str, Any]) -> dict[str, Any]:
        for everyone in (False, True):
            self.stops.on_continued(Event(seq=0, event="continued", body={
                "threadId": arguments["threadId"], "allThreadsContinued": everyone}))
        return {"allThreadsContinued": False}

    def pause_request(self, arguments: dict[str, Any]) -> dict[str, Any]:
        import threading

        if self.stale_first:
            self.stop_thread(4)
            threading.Timer(0.3, self.stop_thread, (arguments["threadId"],)).start()
        else:
            self.stop_thread(arguments["threadId"])
        return {}


def test_continue_then_ctrl_c_on_a_paused_process_keeps_the_other_threads_stopped():
    """`c` then Ctrl-C said "(thread 4 ran on ...)" while `threads` showed 4 stopped
    (the stale notice had come meanwhile); and a stale notice that came before the paused
    thread's stop moved the prompt to thread 4, as if the pause had stopped that one."""
    import signal
    import threading

    actor = PausedProcess()
    said: list[str] = []
    debugger = TerminalDebugger(actor, dict(actor.SESSIONS[3]), said.append)
    debugger.start()
    debugger.announce_other_stops()
    for stale_first in (False, True):
        actor.stale_first = stale_first
        threading.Timer(0.3, signal.pthread_kill, (threading.get_ident(),
                                                   signal.SIGINT)).start()  # Ctrl-C
        assert debugger.execute("c") is Outcome.STOPPED
        assert debugger.thread_id == 3, said  # where the pause stopped it
        said.clear()
        debugger.announce_other_stops()
        assert not any("ran on" in line for line in said), said
        actor.stop_thread(4)  # stale, 0.5 s after the pause
        debugger.execute("threads")
        assert any(line.split()[-2:] == ["Dummy-2", "(stopped)"] for line in said), said


def test_another_threads_breakpoint_while_one_runs_brings_the_prompt_and_its_session():
    """A threaded actor: while thread 4 runs on, thread 3 stops at a breakpoint() of its
    own. The prompt shows thread 3 and runs its session from then on."""
    actor = ThreadedActor(first=4)
    sessions = {s["thread"]: s for s in actor.SESSIONS.values()}
    said: list[str] = []
    debugger = TerminalDebugger(actor, dict(actor.SESSIONS[4]), said.append,
                                find_session=lambda name: sessions.get(name))
    debugger.start()
    actor.continue_request = lambda arguments: actor.stop_thread(3) or {}  # type: ignore
    assert debugger.execute("c") is Outcome.STOPPED
    assert debugger.thread_id == 3 and debugger.session["id"] == "s3"


def test_a_second_ctrl_c_while_the_pause_is_asked_again_still_detaches():
    """Ctrl-C, then another while the prompt asked pydevd for the pause again (a thread in
    C never pauses): it detached, wherever in the wait the second one landed; it was
    "--KeyboardInterrupt--" and a prompt on a thread that still ran."""
    import signal
    import threading

    debuggee, debugger, said = attached()
    debuggee.on_continue = lambda: None  # runs on, in C: it never stops again
    asked: list[dict[str, Any]] = []

    def pause_request(arguments: dict[str, Any]) -> dict[str, Any]:
        asked.append(arguments)
        if len(asked) == 2:  # asked again: the second Ctrl-C lands during the request
            raise KeyboardInterrupt
        return {}

    debuggee.pause_request = pause_request  # type: ignore[attr-defined]
    threading.Timer(0.2, signal.pthread_kill, (threading.get_ident(), signal.SIGINT)).start()
    assert run_in_main_bounded(debugger, "c") is Outcome.QUIT
    assert "session s1 detached; the process runs on" in said
    assert commands_sent(debuggee)[-1] == "disconnect"


def run_in_main_bounded(debugger: TerminalDebugger, line: str) -> Outcome:
    """``debugger.execute(line)`` on this (the main) thread, where Ctrl-C lands; an alarm
    fails the test after 10 s instead of letting it hang."""
    import signal

    def too_long(signum: int, frame: Any) -> None:
        raise AssertionError(f"{line!r} still runs after 10 s")

    previous = signal.signal(signal.SIGALRM, too_long)
    signal.alarm(10)
    try:
        return debugger.execute(line)
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


def _next_breakpoint(debuggee: ScriptedDebuggee, **session: Any) -> Callable[[], None]:
    """``continue`` leads to a new breakpoint() of the same thread (a session of its own),
    as the agent says it: the new session, the old one's end (moved), the stop."""
    def run_on() -> None:
        started = dict(SESSION, id="s2", line=3, **session)
        debuggee.stops.on_session_event(Event(seq=0, event="raydebug/sessionStarted",
                                              body={"session": started}))
        debuggee.end_session("moved")
        debuggee.stop_at(4, "breakpoint")
    return run_on


def test_a_loops_next_breakpoint_is_shown_as_pdb_shows_it():
    debuggee, debugger, said = attached()
    debuggee.on_continue = _next_breakpoint(debuggee)
    assert debugger.execute("c") is Outcome.STOPPED
    assert said == [f"> {PATH}(4)f()", "-> return y"]
    assert debugger.session["id"] == "s2"


def test_another_calls_breakpoint_in_the_same_thread_is_said_with_its_header():
    """A Ray worker's next task (or an actor's next call) came to its breakpoint() before
    the first call's return was seen: it is another session, and said to be."""
    debuggee, debugger, said = attached()
    debugger.session.update(task_id="t1", task_name="first")
    debuggee.on_continue = _next_breakpoint(debuggee, task_id="t2", task_name="second",
                                            node_ip="10.0.0.1")
    assert debugger.execute("c") is Outcome.STOPPED
    assert said == ["session s2: task second on 10.0.0.1, pid 42",
                    f"breakpoint() at {PATH}:3", f"> {PATH}(4)f()", "-> return y"]


def test_a_post_mortem_of_the_same_call_is_said_with_its_header():
    """`c` from a breakpoint(), and the same task raises: its post-mortem session is said
    with the exception (it was shown as a bare stop, the exception never named)."""
    debuggee, debugger, said = attached()
    debugger.session.update(task_id="t1", task_name="train")
    debuggee.on_continue = _next_breakpoint(debuggee, task_id="t1", task_name="train",
                                            reason="exception",
                                            exception="ValueError: diverged")
    assert debugger.execute("c") is Outcome.STOPPED
    assert said[:2] == ["session s2: task train on node1, pid 42",
                        "post-mortem: ValueError: diverged"], said


def test_another_calls_header_comes_first_when_the_hub_says_its_start_after_its_stop():
    """The session's start reaches the hub on the process's control connection, its stop on
    pydevd's: under load the stop came first, and was shown without its header."""
    debuggee, debugger, said = attached()
    debugger.session.update(task_id="t1", task_name="first")
    late = dict(SESSION, id="s2", line=3, task_id="t2", task_name="second", node_ip="10.0.0.1")

    def stop_then_start() -> None:
        debuggee.end_session("moved")
        debuggee.stop_at(4, "breakpoint")

    def stack_then_start(arguments: dict[str, Any]) -> dict[str, Any]:
        debuggee.stops.on_session_event(Event(seq=0, event="raydebug/sessionStarted",
                                              body={"session": late}))
        return ScriptedDebuggee.stackTrace_request(debuggee, arguments)

    debuggee.on_continue = stop_then_start
    debuggee.stackTrace_request = stack_then_start  # type: ignore[method-assign]
    assert debugger.execute("c") is Outcome.STOPPED
    assert said == ["session s2: task second on 10.0.0.1, pid 42",
                    f"breakpoint() at {PATH}:3", f"> {PATH}(4)f()", "-> return y"]
    assert debugger.session["id"] == "s2"


def test_what_the_call_returned_comes_first_when_the_hub_says_its_end_after_the_stop():
    """The first call's end (what it returned) reaches the hub on the process's control
    connection, the next call's stop on pydevd's: under load the stop came first, and the
    `--Return--` line was never shown (a fresh-clone run)."""
    debuggee, debugger, said = attached()
    debugger.session.update(task_id="t1", task_name="first")
    late = dict(SESSION, id="s2", line=3, task_id="t2", task_name="second", node_ip="10.0.0.1")

    told: list[bool] = []

    def stack_then_end_and_start(arguments: dict[str, Any]) -> dict[str, Any]:
        if debuggee.line == 4 and not told:  # with the first stack of the next call's stop
            told.append(True)
            debuggee.end_session("moved", returned="20")
            debuggee.stops.on_session_event(Event(seq=0, event="raydebug/sessionStarted",
                                                  body={"session": late}))
        return ScriptedDebuggee.stackTrace_request(debuggee, arguments)

    debuggee.on_continue = lambda: debuggee.stop_at(4, "breakpoint")
    debuggee.stackTrace_request = stack_then_end_and_start  # type: ignore[method-assign]
    assert debugger.execute("c") is Outcome.STOPPED
    assert said == ["--Return-- f() -> 20", "session s2: task second on 10.0.0.1, pid 42",
                    f"breakpoint() at {PATH}:3", f"> {PATH}(4)f()", "-> return y"]


def test_ray_log_markers_are_not_the_debuggees_output():
    from raydebug.terminal.remote import Remote

    printed: list[str] = []
    remote = Remote(lambda text, category: printed.append(text))
    try:
        for text in (":task_name:second\n", ":actor_name:Trainer\n", ":job_id:01000000\n",
                     "a line\n:task_name:second\nanother\n", "half :task_name: a line\n"):
            remote._on_output(Event(seq=0, event="output",
                                    body={"category": "stdout", "output": text}))
    finally:
        remote.close()
    assert printed == ["a line\nanother\n", "half :task_name: a line\n"]


class WithALibraryThread(ScriptedDebuggee):
    """Thread 2 (Ray's PythonGCThread, all of it library code) is stopped too: pydevd
    shows it no frame (the library frames are left out)."""

    def __init__(self) -> None:
        super().__init__()
        self._seq += 1
        self.stops.on_stopped(Event(seq=self._seq, event="stopped",
                                    body={"threadId": 2, "reason": "pause"}))

    def threads_request(self, arguments: dict[str, Any]) -> dict[str, Any]:
        return {"threads": [{"id": 1, "name": "MainThread"}, {"id": 2, "name": "PythonGCThread"}]}

    def stackTrace_request(self, arguments: dict[str, Any]) -> dict[str, Any]:
        return super().stackTrace_request(arguments) if arguments["threadId"] == 1 \
            else {"stackFrames": []}


NO_FRAMES = ("*** thread 2 shows no frames: it is stopped in library code only; `threads` "
             "lists the others")


def test_thread_n_of_a_thread_with_no_frame_to_show_says_why_and_stays():
    debuggee = WithALibraryThread()
    said: list[str] = []
    debugger = TerminalDebugger(debuggee, dict(SESSION), said.append)
    debugger.start()
    said.clear()

    debugger.execute("thread 2")
    assert said == [NO_FRAMES]
    assert debugger.thread_id == 1
    said.clear()
    debugger.execute("where")
    assert said[-2:] == [f"> {PATH}(2)f()", "-> x = n * 2"]  # still thread 1's frames


def test_a_thread_with_no_frame_to_show_says_why_at_each_command():
    """The session's own thread did not stop (blocked in C): the prompt starts on another,
    which shows no frames."""
    debuggee = WithALibraryThread()
    said: list[str] = []
    debugger = TerminalDebugger(debuggee, {**SESSION, "thread": "PythonGCThread"},
                                said.append)
    debugger.start()
    assert said[-1] == NO_FRAMES
    said.clear()

    for command in ("where", "p x"):
        debugger.execute(command)
    assert said == [NO_FRAMES, NO_FRAMES]  # (where said nothing; p: 'not stopped')


def test_a_sessions_end_never_moves_the_prompt_to_a_thread_with_no_frame_to_show():
    """Found by use: `raydebug pause` of a task also stopped Ray's PythonGCThread; once the
    task returned, the prompt moved there and said it 'shows no frames'. A thread stopped
    in library code only is no one's to go on with: the prompt leaves, the process runs on."""
    debuggee = WithALibraryThread()
    said: list[str] = []
    debugger = TerminalDebugger(debuggee, dict(SESSION), said.append)
    debugger.start()
    said.clear()
    debuggee.on_continue = lambda: debuggee.end_session("returned", returned="7")
    assert debugger.execute("c") is Outcome.DETACHED
    assert said == ["--Return-- f() -> 7", "session s1: f() returned; the process runs on"]
    assert debuggee.requests[-1] == ("disconnect", {"terminateDebuggee": False})


def test_an_idle_ray_worker_paused_says_it_runs_no_task_and_what_to_do():
    """Found by use: an idle actor paused showed no frames on any thread, and 'library
    code' told the user nothing of why nor what to do."""
    debuggee = WithALibraryThread()
    said: list[str] = []
    idle = {**SESSION, "thread": "PythonGCThread", "worker_id": "ab12", "task_name": None}
    TerminalDebugger(debuggee, idle, said.append).start()
    assert said[-1] == ("*** thread 2 shows no frames: this Ray worker runs no task now (it "
                        "waits in Ray's own code); pause it while a task or method runs, or "
                        f"stop in one with `{raydebug_command()} break FILE:LINE`; `threads` "
                        "lists the others")


class KeysWhileWaiting:
    """A terminal on which ``keys`` are typed, one per look, while ``raydebug attach``
    waits for a breakpoint (what it says is kept in ``said``)."""

    interactive = True

    def __init__(self, *keys: str) -> None:
        self.keys = list(keys)
        self.said: list[str] = []

    def write(self, line: str) -> None:
        self.said.append(line)

    def poll_line(self) -> str | None:
        return self.keys.pop(0) if self.keys else None

    def save_history(self) -> None: ...
    def discard_typeahead(self) -> None: ...
    def close(self) -> None: ...


def test_ctrl_d_while_attach_waits_for_a_breakpoint_stops_the_wait():
    """(It was read at the first prompt instead: the breakpoint that came was left at once.)"""
    from raydebug.terminal.attach import AttachCommand
    from raydebug.terminal.running import EOF

    terminal = KeysWhileWaiting("p x", EOF)
    command = AttachCommand("127.0.0.1:1", None, follow=False, wait_timeout=2.0,
                            terminal=terminal)  # type: ignore[arg-type]
    polls: list[str] = []
    command._sessions = lambda query="": polls.append(query) or []  # type: ignore[method-assign]

    assert command.run(None) == 0
    assert terminal.said == [
        "waiting for a breakpoint... (hub 127.0.0.1:1; Ctrl-C stops waiting)",
        "*** nothing is paused yet: no command runs (Ctrl-C or Ctrl-D stops waiting)",
        "stopped waiting for a breakpoint"]
    assert all("timeout=0.5" in query for query in polls[1::2])  # the keys looked at often


class ExitingThreads(ThreadedActor):
    """As :class:`ThreadedActor`, but a continued thread's function runs to its end and the
    thread ends: gone from ``threads`` when the hub's word of its session's end is read."""

    def __init__(self, first: int) -> None:
        super().__init__(first)
        self.gone: set[int] = set()

    def threads_request(self, arguments: dict[str, Any]) -> dict[str, Any]:
        return {"threads": [t for t in super().threads_request(arguments)["threads"]
                            if t["id"] not in self.gone]}

    def continue_request(self, arguments: dict[str, Any]) -> dict[str, Any]:
        self.gone.add(arguments["threadId"])
        return super().continue_request(arguments)


def test_a_thread_that_ended_after_its_function_returned_leaves_the_prompt_to_a_stopped_one():
    """Found by use: Ctrl-C moved the prompt to a spinning thread, `c` ran it to its end and
    the thread ended; the prompt said "running" for ever (its session's end named a thread
    no longer there), and Ctrl-C then said the thread "does not pause"."""
    actor = ExitingThreads(first=3)
    actor.stop_thread(4)
    said: list[str] = []
    debugger = TerminalDebugger(actor, dict(actor.SESSIONS[3]), said.append)  # no hub
    debugger.start()
    assert debugger.execute("thread 4") is Outcome.STOPPED
    assert run_bounded(debugger, "c") is Outcome.STOPPED  # back to thread 3
    assert "session s4: f() returned; the process runs on" in said
    assert debugger.thread_id == 3


def test_p_of_none_prints_none_as_pdb_does():
    """pydevd answers a None in the repl context with "" (found by use: `p` of a None value
    printed a blank line)."""
    debuggee, debugger, said = attached()
    debuggee.values["nothing"] = ""  # what pydevd's evaluate answers for None there
    debugger.execute("p nothing")
    assert said == ["None"]


def test_a_process_id_given_to_attach_picks_its_oldest_waiting_session():
    from raydebug.terminal.attach import _of_one_process

    running = {"id": "a1", "process": "p1", "state": "running"}
    waiting = [{"id": f"b{n}", "process": "p1", "state": "waiting"} for n in range(2)]
    assert _of_one_process([running, *waiting]) is waiting[0]
    assert _of_one_process([running]) is running  # the only one: attach says it runs on
    assert _of_one_process([running, dict(running, id="a2")]) is None  # the caller names them
    assert _of_one_process([]) is None
