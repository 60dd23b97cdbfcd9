"""`raydebug attach` driven as a person would: a real pseudo-terminal (pexpect), a real hub,
real paused processes."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pexpect
import pytest

from devtools.terminal import HINT_SOON, JOB, LEAVE_PROMPT, PROMPT, Attach, start_attach
from helpers import TIMEOUT, HubProcess, finish, line_of, start_hub, write_script

pytestmark = pytest.mark.integration

# What `c` prints when the session's function returns: said by the agent, unless the process
# exits first (a script that ends right after it).
SESSION_OVER = ["returned; the process runs on", "has ended"]

SPIN = """
state = {"go": True}

def spin():
    laps = 0
    print("spinning", flush=True)
    while state["go"]:
        laps += 1
    return laps

breakpoint()
laps = spin()
print(f"spun {laps > 0}", flush=True)
"""

FAILING = """
def divide(numerator, denominator):
    share = numerator / denominator  # raises
    return share

divide(84, 0)
"""


def test_a_session_debugged_with_pdb_commands(hub: HubProcess, attach: list[Attach],
                                              tmp_path: Path):
    script = write_script(tmp_path, "job.py", JOB)
    worker = hub.spawn(script, "job-1")
    session = hub.wait_sessions(1)[0]
    term = start_attach(hub, attach)

    header = term.expect(PROMPT)
    assert f"session {session['id']}" in header and f"pid {worker.pid}" in header
    first_stop = line_of(script, "first stop")
    assert f"> {script}({first_stop})compute()" in header
    assert f"{first_stop:>4}  ->     note = \"start\"" in header  # the listing marks the line

    where = term.do("where")
    assert where.index("main()") < where.index("> " + str(script) + f"({first_stop})compute()")
    assert "main()" in term.do("up")
    assert "compute()" in term.do("down")
    assert term.do("p total").strip() == "7"
    term.do("!total = 10")
    assert term.do("p total").strip() == "10"
    term.child.send("p tot\t")  # Tab completes from the debuggee's names
    term.child.sendline("")
    term.expect("p total\r\n")
    assert term.expect(PROMPT).strip() == "10"
    assert "a = 3" in term.do("args")

    break_line = line_of(script, "break here")
    assert f"Breakpoint 1 at {script}:{break_line}" in term.do(f"b {break_line}")
    assert f"({break_line})compute()" in term.do("c")
    assert "scaled = double(total, factor)" in term.do("n")
    step = term.do("s")
    assert "double()" in step and "twice = value * factor" in step
    assert "compute()" in term.do("r")
    ended = term.do_and_end("c", SESSION_OVER)
    assert "job-1 result=20 total=10" in ended  # the assignment took, output shown in place
    term.expect(LEAVE_PROMPT)
    term.child.sendline("")
    term.child.expect(pexpect.EOF)
    code, out, _ = finish(worker)
    assert code == 0 and "job-1 result=20 total=10" in out
    history = Path(os.environ["XDG_STATE_HOME"]) / "raydebug" / "attach_history"
    assert "!total = 10" in history.read_text()  # kept for the next run


LOOP = """
import threading

def work(n):
    acc = 0
    for i in range(n):  # loop
        acc += i  # add
    done = acc * 2  # after loop
    return done

def idle(seconds):
    threading.Event().wait(seconds)  # idle

helper = threading.Thread(target=idle, args=(60,), name="helper", daemon=True)
helper.start()
breakpoint()
print("work", work(3), flush=True)
"""


def test_more_pdb_commands_in_colour(hub: HubProcess, attach: list[Attach], tmp_path: Path):
    script = write_script(tmp_path, "loop.py", LOOP)
    worker = hub.spawn(script)
    hub.wait_sessions(1)
    term = start_attach(hub, attach, colour=True)
    assert "\x1b[" in term.expect(PROMPT)  # the listing is highlighted on a terminal
    assert "Temporary breakpoint 1 at function work" in term.do("tbreak work")
    stopped = term.do("c")
    assert "Deleted breakpoint 1" in stopped and "work()" in stopped
    assert "return done" in term.do("ll")
    assert "No breakpoints." in term.do("b")
    add_line = line_of(script, "# add")
    assert f"Breakpoint 2 at {script}:{add_line}" in term.do(f"b {add_line}, i == 2")
    assert "display acc: *** NameError" in term.do("display acc")  # not assigned yet
    stopped = term.do("c")  # the condition skips i == 0 and 1
    assert f"({add_line})work()" in stopped and "display acc: 1  [old: ***" in stopped
    assert "Disabled breakpoint 2" in term.do("disable 2")
    assert "B" in term.do("l")  # still listed, marked
    assert "Enabled breakpoint 2" in term.do("enable 2")
    assert "Deleted breakpoint 2" in term.do("cl 2")
    assert f"({line_of(script, 'after loop')})work()" in term.do("until")
    threads = term.do("threads")
    # As in pdb, only the thread that stopped is stopped: the helper runs on.
    assert "MainThread  (stopped)" in threads and "helper  (running)" in threads
    helper_id = re.search(r"(\d+)  helper", threads).group(1)  # type: ignore[union-attr]
    assert f"*** thread {helper_id} is not stopped" in term.do(f"thread {helper_id}")
    assert "*** thread 999999 is not stopped" in term.do("thread 999999")
    term.do_and_end("q", "the process runs on")
    term.child.expect(pexpect.EOF)
    code, out, _ = finish(worker)
    assert code == 0 and "work 6" in out


def test_kill_asks_first_and_needs_a_hub_that_allows_it(tmp_path: Path):
    hub = start_hub("--allow-terminate")
    term = None
    try:
        worker = hub.spawn(write_script(tmp_path, "job.py", JOB), "job-1")
        hub.wait_sessions(1)
        term = Attach(hub)
        term.expect(PROMPT)
        term.child.sendline("kill")
        term.expect("Kill process")
        term.child.sendline("n")
        term.expect(PROMPT)
        term.child.sendline("kill")
        term.expect("Kill process")
        term.child.sendline("y")
        term.expect(f"killed process {worker.pid}")
        term.child.expect(pexpect.EOF)
        _, out, _ = finish(worker)  # pydevd ends it with os._exit(0)
        assert "result=" not in out  # it never ran past the breakpoint
    finally:
        if term is not None:
            term.close()
        hub.close()


def test_follow_visits_three_processes_one_after_another(hub: HubProcess,
                                                         attach: list[Attach],
                                                         tmp_path: Path):
    script = write_script(tmp_path, "job.py", JOB)
    workers = [hub.spawn(script, f"job-{n}") for n in (1, 2)]
    hub.wait_sessions(2)
    term = start_attach(hub, attach, "--follow")
    visited = []
    for number in (1, 2, 3):
        header = term.expect(PROMPT)
        pid = int(re.search(r"pid (\d+)", header).group(1))  # type: ignore[union-attr]
        visited.append(pid)
        if number > 1:
            assert f"── breakpoint {number} ──" in header
        assert term.do("p total").strip() == "7"
        term.do_and_end("c", SESSION_OVER)
        if number == 2:
            assert "waiting for a breakpoint..." in term.expect("Ctrl-C stops waiting")
            workers.append(hub.spawn(script, "job-3"))
    assert sorted(visited) == sorted(w.pid for w in workers)
    term.expect("waiting for a breakpoint...")
    term.child.sendintr()
    term.child.expect(pexpect.EOF)
    for number, worker in enumerate(workers, start=1):
        code, out, _ = finish(worker)
        assert code == 0 and f"job-{number} result=14" in out


def test_post_mortem_shows_the_exception_and_its_frame(hub: HubProcess,
                                                      attach: list[Attach], tmp_path: Path):
    script = write_script(tmp_path, "failing.py", FAILING)
    worker = hub.spawn(script, RAYDEBUG_POST_MORTEM="1")
    hub.wait_sessions(1)
    term = start_attach(hub, attach)
    header = term.expect(PROMPT)
    assert "post-mortem: ZeroDivisionError: division by zero" in header
    assert f"({line_of(script, 'raises')})divide()" in header
    assert term.do("p numerator * 2").strip() == "168"
    exceptions = term.do("exceptions")
    assert "ZeroDivisionError" in exceptions and "division by zero" in exceptions
    assert "*** NameError: name 'nothing_here' is not defined" in term.do("p nothing_here")
    term.do_and_end("c", "the process runs on")
    code, _, err = finish(worker)
    assert code != 0 and "ZeroDivisionError" in err  # the exception went on as uncaught


def test_ctrl_c_pauses_a_running_process(hub: HubProcess, attach: list[Attach],
                                         tmp_path: Path):
    script = write_script(tmp_path, "spin.py", SPIN)
    worker = hub.spawn(script)
    hub.wait_sessions(1)
    term = start_attach(hub, attach, env=HINT_SOON)  # spinning meanwhile: half a second
    term.expect(PROMPT)
    term.child.sendline("n")  # spin() never returns by itself
    term.expect("spinning")  # its output, shown in place
    term.expect("(running; Ctrl-C pauses it, q detaches)")  # said once the silence lasts
    term.child.sendintr()
    paused = term.expect(PROMPT)
    assert "pausing (Ctrl-C" in paused and "spin()" in paused
    assert term.do("p state[\"go\"]").strip() == "True"
    term.do('!state["go"] = False')
    term.do_and_end("c", SESSION_OVER)
    code, out, _ = finish(worker)
    assert code == 0 and "spun True" in out


def test_a_worker_killed_under_the_prompt_ends_the_session_cleanly(
        hub: HubProcess, attach: list[Attach], tmp_path: Path):
    worker = hub.spawn(write_script(tmp_path, "job.py", JOB), "job-1")
    hub.wait_sessions(1)
    term = start_attach(hub, attach)
    term.expect(PROMPT)
    worker.kill()
    worker.wait(timeout=TIMEOUT)
    hub.wait_sessions(0)
    term.child.sendline("p total")
    term.expect("has ended")
    # Said at the prompt, Enter (here the line typed) leaves; said in answer to the line,
    # as the session ended by itself: through the prompt that waits for Enter.
    if term.child.expect_exact([pexpect.EOF, LEAVE_PROMPT]) == 1:
        term.child.sendline("")
        term.child.expect(pexpect.EOF)
    assert "Traceback" not in str(term.child.before)
    term.child.close()
    assert term.child.exitstatus == 0


def test_an_unknown_session_is_an_error_that_lists_the_sessions(hub: HubProcess,
                                                                tmp_path: Path):
    script = write_script(tmp_path, "job.py", JOB)
    worker = hub.spawn(script, "job-1")
    session = hub.wait_sessions(1)[0]
    result = subprocess.run(
        [sys.executable, "-m", "raydebug", "attach", "no-such-id", "--hub",
         hub.client_address], capture_output=True, text=True, timeout=TIMEOUT,
        stdin=subprocess.DEVNULL)
    assert result.returncode == 1
    assert "no session 'no-such-id'" in result.stderr
    assert f"{session['id']} (waiting, pid {worker.pid})" in result.stderr

    # The id of its process, as `raydebug pause` and `ps` print it (found by use: "no
    # session 'p1604fef5'"): that process's waiting session.
    result = subprocess.run(
        [sys.executable, "-m", "raydebug", "attach", session["process"], "--hub",
         hub.client_address], input="p total\nc\n", capture_output=True, text=True,
        timeout=TIMEOUT)
    assert result.returncode == 0, result.stderr
    assert f"{PROMPT}p total\n7\n" in result.stdout, result.stdout
    code, out, _ = finish(worker)
    assert code == 0 and "result=14" in out


def test_piped_commands_read_like_a_transcript(hub: HubProcess, tmp_path: Path):
    script = write_script(tmp_path, "job.py", JOB)
    worker = hub.spawn(script, "job-1")
    hub.wait_sessions(1)
    result = subprocess.run(
        [sys.executable, "-m", "raydebug", "attach", "--hub", hub.client_address],
        input="where\np total\nbogus(\nc\n", capture_output=True, text=True,
        timeout=TIMEOUT)
    assert result.returncode == 0, result.stderr
    assert f"{PROMPT}p total\n7\n" in result.stdout
    assert "*** SyntaxError" in result.stdout  # pdb's way, never a raydebug traceback
    assert "Traceback" not in result.stdout + result.stderr
    assert "\x1b[" not in result.stdout  # no colour when stdout is no terminal
    code, out, _ = finish(worker)
    assert code == 0 and "result=14" in out


WAITS_FOREVER = """
import threading
input()  # armed once the hub lists it live (spawn_linked)
threading.Event().wait()  # a hang: no breakpoint() will ever come
"""


def test_waiting_beside_a_running_live_process_names_the_pause_that_stops_it(
        hub: HubProcess, attach: list[Attach], tmp_path: Path):
    """Found by use: after `raydebug link pid=P` of a hang, `raydebug attach` said only
    "waiting for a breakpoint...", which nothing would ever end."""
    from raydebug.client.hub_api import pause

    proc = hub.spawn_linked(write_script(tmp_path, "waits.py", WAITS_FOREVER))
    term = start_attach(hub, attach)
    said = term.expect("stops it here")
    assert re.search(rf"a live process runs \(none paused\): `\S*raydebug pause pid={proc.pid}`"
                     r"\s+in another\s+terminal", said), said
    assert pause(hub.client_address, [f"pid={proc.pid}"])["paused"]
    assert "threading.Event().wait()" in term.expect(PROMPT)
