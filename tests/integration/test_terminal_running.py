"""`raydebug attach` while the debuggee runs: the end of a session's function, `c` that stays
attached, threads that stop and run one at a time, and the ways out. A real pseudo-terminal
(pexpect), a real hub, real paused processes."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import termios
from pathlib import Path

import pexpect
import pytest

from devtools.terminal import HINT_SOON, LEAVE_PROMPT, PROMPT, Attach, end_spawned, start_attach
from helpers import TIMEOUT, HubProcess, line_of, start_hub, stop, write_script

pytestmark = pytest.mark.integration

# As in a Ray worker: the task's thread goes back to library code (the pool's) and waits for
# more work, where pydevd never stops; the process lives on.
POOL = """
import concurrent.futures
import threading

def helper():
    return 5

def task(x):
    y = x * 2
    breakpoint()
    note = "first stop"
    return y + 1  # last line

with concurrent.futures.ThreadPoolExecutor(1) as pool:
    print("result", pool.submit(task, 20).result(), flush=True)
    threading.Event().wait(60)
"""

# A post-mortem in a thread: once resumed, the exception goes on into threading's own code.
THREAD_FAILS = """
import threading

def divide(a, b):
    return a / b  # raises

worker = threading.Thread(target=divide, args=(1, 0), name="divider")
worker.start()
worker.join()
threading.Event().wait(60)
"""

# A thread blocked in C: pydevd cannot pause it.
BLOCKED = """
import threading

breakpoint()
threading.Event().wait(60)  # blocked
print("woke", flush=True)
"""

LOOP = """
for i in range(50):
    breakpoint()
print("loop done", flush=True)
"""

TWO_THREADS = """
import threading

both_running = threading.Barrier(2)

def work(name):
    both_running.wait()
    value = name.upper()
    breakpoint()
    return value  # returns

threads = [threading.Thread(target=work, args=(n,), name=n) for n in ("alpha", "beta")]
for thread in threads:
    thread.start()
for thread in threads:
    thread.join()
print("joined", flush=True)
threading.Event().wait(60)
"""


def attached(hub: HubProcess, started: list[Attach], tmp_path: Path, source: str,
             *args: str, terminal: dict[str, str] | None = None,
             **env: str) -> tuple[Attach, Path]:
    """A process of ``source`` paused once (``env``: its environment's additions), and
    ``raydebug attach`` at its prompt (``terminal``: its environment's)."""
    script = write_script(tmp_path, "job.py", source)
    hub.spawn(script, **env)
    hub.wait_sessions(1)
    term = start_attach(hub, started, *args, env=terminal)
    term.expect(PROMPT)
    return term, script


def exits_cleanly(term: Attach) -> str:
    """What ``raydebug attach`` printed until it exited; asserts exit status 0."""
    term.child.expect(pexpect.EOF)
    rest = str(term.child.before)
    term.child.close()
    assert term.child.exitstatus == 0, rest
    return rest


def leaves_after_the_end(term: Attach) -> str:
    """What ``raydebug attach`` printed as the session ended by itself, up to the prompt
    that keeps what was typed ahead from the shell; then Enter, and it exits (status 0)."""
    said = term.expect(LEAVE_PROMPT)
    term.child.sendline("")
    return said + exits_cleanly(term)


def test_next_off_the_end_of_the_function_ends_the_session_with_its_value(
        hub: HubProcess, attach: list[Attach], tmp_path: Path):
    term, script = attached(hub, attach, tmp_path, POOL)
    assert f"({line_of(script, 'last line')})task()" in term.do("n")
    term.child.sendline("n")
    ended = leaves_after_the_end(term)
    assert "--Return-- task() -> 41" in ended
    assert "task() returned; the process runs on" in ended
    assert hub.wait_sessions(0) == []


@pytest.mark.parametrize("typed", ["p rows", "n, p rows", "Ctrl-D", "Ctrl-C"])
def test_what_is_typed_as_the_session_ends_never_reaches_the_shell(
        hub: HubProcess, tmp_path: Path, typed: str):
    """`n` off the end of the function ends the session; `p rows`, typed for a stop that did
    not come, ran in the shell after ``raydebug attach`` (bash: p: command not found). Here
    the shell reads a line after it, and says what it got. Every line typed is said not
    run; an empty one leaves."""
    hub.spawn(write_script(tmp_path, "job.py", POOL))
    hub.wait_sessions(1)
    # What was typed is in the terminal by the time attach exits: the shell's read finds
    # it at once, its timeout is only how long it waits for more.
    command = f"{sys.executable} -m raydebug attach --hub {hub.client_address}; " \
              'read -t 0.5 line; echo "GOT[$line]"'
    shell = pexpect.spawn("bash", ["-c", command], env={**os.environ, "NO_COLOR": "1"},
                          encoding="utf-8", timeout=TIMEOUT, dimensions=(24, 80))
    try:
        shell.expect_exact(PROMPT)
        shell.sendline("n")
        shell.expect_exact(PROMPT)
        shell.sendline("n")  # off the end
        shell.expect_exact("task() returned; the process runs on")
        if typed == "Ctrl-D":
            shell.sendeof()
        elif typed == "Ctrl-C":
            shell.sendintr()
        else:
            for line in typed.split(", "):
                shell.sendline(line)
                shell.expect_exact(f"not run: {line} (the session is over)")
            shell.expect_exact(LEAVE_PROMPT)
            shell.sendline("")
        shell.expect(r"GOT\[(.*)\]")
        assert shell.match.group(1) == ""
        assert "Traceback" not in str(shell.before)
    finally:
        end_spawned(shell)


def test_step_off_the_end_says_no_pydevd_advice(hub: HubProcess, attach: list[Attach],
                                                tmp_path: Path):
    term, _ = attached(hub, attach, tmp_path, POOL)
    term.do("n")
    term.child.sendline("s")
    ended = leaves_after_the_end(term)
    assert "--Return-- task() -> 41" in ended and "task() returned" in ended
    assert "launch.json" not in ended and "Frame skipped" not in ended


LIBRARY_CALL = """
import json

breakpoint()
text = json.dumps({"a": 1})
print(text, flush=True)  # next
"""


def test_step_into_a_library_call_moves_on_without_pydevd_advice(
        hub: HubProcess, attach: list[Attach], tmp_path: Path):
    term, script = attached(hub, attach, tmp_path, LIBRARY_CALL)
    stepped = term.do("s")
    assert f"({line_of(script, '# next')})<module>()" in stepped
    assert "launch.json" not in stepped and "justMyCode" not in stepped
    term.do_and_end("q", "the process runs on")


def test_continue_with_a_breakpoint_never_hit_ends_when_the_function_returns(
        hub: HubProcess, attach: list[Attach], tmp_path: Path):
    term, _ = attached(hub, attach, tmp_path, POOL)
    assert "Breakpoint 1 at function helper" in term.do("b helper")
    term.child.sendline("c")
    ended = leaves_after_the_end(term)
    assert "task() returned; the process runs on" in ended
    assert "--Return--" not in ended  # only a step sees the value


def test_next_in_a_post_mortem_ends_the_session(hub: HubProcess, attach: list[Attach],
                                                tmp_path: Path):
    term, _ = attached(hub, attach, tmp_path, THREAD_FAILS, RAYDEBUG_POST_MORTEM="1")
    term.child.sendline("n")
    ended = leaves_after_the_end(term)
    assert "the exception goes on; the process runs on" in ended


@pytest.mark.parametrize("way_out", ["q", "Ctrl-D"])
def test_a_running_thread_can_always_be_left(
        hub: HubProcess, attach: list[Attach], tmp_path: Path, way_out: str):
    term, _ = attached(hub, attach, tmp_path, BLOCKED, terminal=HINT_SOON)
    term.child.sendline("n")
    term.expect("(running; Ctrl-C pauses it, q detaches)")  # the prompt has read `n`
    if way_out == "q":
        term.child.sendline("q")
    else:
        term.child.sendeof()
    assert "detached; the process runs on" in exits_cleanly(term)
    assert hub.wait_sessions(0) == []  # detached: the thread runs on, its session is over


def test_ctrl_c_pauses_a_thread_blocked_in_c(hub: HubProcess, attach: list[Attach],
                                             tmp_path: Path):
    """The DAP pause Ctrl-C sends goes the way of raydebug pause: the main thread blocked
    in C (here with no signal of raydebug's: the process linked at its breakpoint) is
    served where it waits, and the prompt comes back at the blocked line."""
    term, script = attached(hub, attach, tmp_path, BLOCKED, terminal=HINT_SOON)
    term.child.sendline("n")
    term.expect("(running; Ctrl-C pauses it, q detaches)")  # the prompt has read `n`
    term.child.sendintr()
    term.expect("pausing (Ctrl-C")
    paused = term.expect(PROMPT)
    assert "it does not pause" not in paused, paused
    assert f"({line_of(script, '# blocked')})<module>()" in term.do("where")
    term.do_and_end("q", "the process runs on")
    assert hub.wait_sessions(0) == []  # detached: the thread runs on, its session is over


def test_continue_stays_attached_through_fifty_breakpoints(hub: HubProcess,
                                                           attach: list[Attach],
                                                           tmp_path: Path):
    term, _ = attached(hub, attach, tmp_path, LOOP, "--follow")
    values = []
    for _ in range(50):
        values.append(term.do("p i").strip())
        term.child.sendline("c")
        term.child.expect_exact([PROMPT, "waiting for a breakpoint..."])
    assert values == [str(i) for i in range(50)]
    assert "loop done" in str(term.child.before)
    term.child.sendintr()
    term.child.expect(pexpect.EOF)


def test_continue_through_fifty_breakpoints_piped(hub: HubProcess, tmp_path: Path):
    hub.spawn(write_script(tmp_path, "job.py", LOOP))
    hub.wait_sessions(1)
    result = subprocess.run(
        [sys.executable, "-m", "raydebug", "attach", "--follow", "--timeout", "2",
         "--hub", hub.client_address],
        input="p i\nc\n" * 50, capture_output=True, text=True, timeout=120)
    printed = re.findall(rf"{re.escape(PROMPT)}p i\n(\d+)\n", result.stdout)
    assert printed == [str(i) for i in range(50)], result.stdout[-3000:] + result.stderr
    assert "loop done" in result.stdout


def test_continue_in_one_thread_leaves_the_other_stopped(hub: HubProcess,
                                                         attach: list[Attach],
                                                         tmp_path: Path):
    hub.spawn(write_script(tmp_path, "job.py", TWO_THREADS))
    sessions = {s["thread"]: s for s in hub.wait_sessions(2)}
    term = start_attach(hub, attach, str(sessions["alpha"]["id"]))
    term.expect(PROMPT)
    # beta's stop may come after the prompt, said under the value: "(stopped too: thread N...)"
    assert term.do("p value").strip().splitlines()[0] == "'ALPHA'"
    threads = term.do("threads")
    assert re.search(r"\* +\d+  alpha  \(stopped\)", threads), threads
    assert re.search(r"  +\d+  beta  \(stopped\)", threads), threads
    # `c` runs alpha only: it returns, and beta, still stopped, is next.
    switched = term.do("c")
    assert "work() returned" in switched and "beta) is still stopped" in switched
    assert f"session {sessions['beta']['id']}" in switched
    assert term.do("p value").strip() == "'BETA'"
    term.child.sendline("c")
    assert "work() returned; the process runs on" in leaves_after_the_end(term)


def test_a_process_that_dies_while_the_prompt_waits_is_said_at_once(
        hub: HubProcess, attach: list[Attach], tmp_path: Path):
    """`ray stop` (or a kill) while the user reads the code at the prompt: the prompt says
    so then, above itself, not only when the next command is typed."""
    script = write_script(tmp_path, "job.py", LOOP)
    proc = hub.spawn(script)
    hub.wait_sessions(1)
    term = start_attach(hub, attach)
    term.expect(PROMPT)
    term.child.send("p i")  # typed, not yet sent: drawn again under the notice
    proc.kill()
    proc.wait(10)
    term.expect("session ")
    term.expect(PROMPT + "p i")
    term.child.sendline("")
    assert "detached" not in exits_cleanly(term)


EXITS = """
import os

breakpoint()
x = 1
os._exit(3)  # no return: the process ends in the session's function
"""


def test_a_process_that_exits_after_the_last_continue_is_said_by_its_pid(
        hub: HubProcess, attach: list[Attach], tmp_path: Path):
    term, _ = attached(hub, attach, tmp_path, EXITS)
    [session] = hub.wait_sessions(1)
    term.child.sendline("c")
    ended = leaves_after_the_end(term)
    assert f"session {session['id']}: process {session['pid']} has ended" in ended, ended
    assert "connection closed" not in ended


# A hub that never comes back is waited for a second, not the fifteen given to one Ray
# restarts (which test_terminal_hub_lost's come back within).
GONE_SOON = {"RAYDEBUG_RECONNECT_FOR": "1"}


@pytest.mark.parametrize("when", ["at the prompt", "while it runs"])
def test_the_hub_stopping_ends_the_session_and_the_follow_with_one_clear_line(
        tmp_path: Path, when: str):
    """A driver's local Ray (or `ray stop`) takes the hub along with its workers: the
    terminal said "connection closed (the peer closed the connection)", then, following,
    "http://...?state=waiting&min=1&timeout=30.0: not an HTTP answer", exit status 1."""
    own = start_hub()
    started: list[Attach] = []
    try:
        term, _ = attached(own, started, tmp_path, BLOCKED, "--follow",
                           terminal={**HINT_SOON, **GONE_SOON})
        if when == "while it runs":
            term.child.sendline("n")
            term.expect("(running; Ctrl-C pauses it")
        stop(own.proc)  # as its cluster stops it: at once
        said = f"lost the connection to the hub at {own.client_address} (it stopped or " \
               "restarted); the process may still be paused"
        term.expect(said)
        if when == "at the prompt":
            term.expect("(Enter reconnects)")
            term.child.sendline("")
        term.expect(f"reconnecting to the hub at {own.client_address} (for up to 1 s")
        rest = exits_cleanly(term)  # exit status 0: followed to the end
        assert f"the hub at {own.client_address} has gone away (it stopped, or its Ray " \
               "cluster did): no more breakpoints to follow" in rest, rest
        assert "not an HTTP answer" not in rest and "connection closed" not in rest
    finally:
        for each in started:
            each.close()
        own.close()


# As a Ray worker runs the next task it was given: one thread, one call after another.
NEXT_CALL = """
import concurrent.futures
import threading

def first():
    value = 20
    breakpoint()
    return value  # last line

def second():
    breakpoint()
    return "second"  # its stop

with concurrent.futures.ThreadPoolExecutor(1) as pool:
    calls = [pool.submit(first), pool.submit(second)]
    print("results", [call.result() for call in calls], flush=True)
    threading.Event().wait(60)
"""


def test_stepping_off_a_call_into_the_next_call_of_its_thread_says_whose_stop_it_is(
        hub: HubProcess, attach: list[Attach], tmp_path: Path):
    """The next call's breakpoint() came before the first call's return was seen: its stop
    was shown as `> ...second()` with no word of the new session, as if the step had gone
    on into another function of the same one."""
    term, script = attached(hub, attach, tmp_path, NEXT_CALL)
    assert f"({line_of(script, 'last line')})first()" in str(term.child.before)
    stepped = term.do("n")
    sessions = hub.wait_sessions(1)
    # what the first call returned, though the thread went on into the next before the
    # return was seen (it was lost: the first session ended as "moved", with no value)
    assert "--Return-- first() -> 20\r\n" in stepped, stepped
    assert re.search(rf"session {sessions[0]['id']}: [^\r\n]* pid \d+\r\n"
                     rf"breakpoint\(\) at {re.escape(str(script))}:"
                     rf"{line_of(script, 'its stop') - 1}\r\n"
                     rf"> [^\r\n]*\({line_of(script, 'its stop')}\)second\(\)", stepped), stepped
    term.child.sendline("c")
    assert "second() returned" in leaves_after_the_end(term)


@pytest.mark.parametrize("when", ["at the prompt", "while it runs"])
def test_sigterm_leaves_quietly_and_puts_the_terminal_back(
        hub: HubProcess, attach: list[Attach], tmp_path: Path, when: str):
    """`make demo` stops its debugger when the job is done: with SIGINT, which a running
    wait took for Ctrl-C ("pausing (Ctrl-C; ...)" though nobody pressed it); SIGTERM killed
    it at once, leaving the terminal without echo when the prompt had it."""
    term, _ = attached(hub, attach, tmp_path, BLOCKED, terminal=HINT_SOON)
    if when == "while it runs":
        term.child.sendline("n")
        term.expect("(running; Ctrl-C pauses it")
    term.child.kill(signal.SIGTERM)
    term.child.expect(pexpect.EOF)
    rest = str(term.child.before)
    attributes = termios.tcgetattr(term.child.child_fd)[3]
    term.child.close()
    assert term.child.exitstatus == 143, (term.child.exitstatus, term.child.signalstatus)
    assert "pausing" not in rest and "Traceback" not in rest, rest
    assert attributes & termios.ECHO and attributes & termios.ICANON
    assert not attributes & termios.NOFLSH
    assert hub.wait_sessions(0) == []  # detached: the thread runs on
