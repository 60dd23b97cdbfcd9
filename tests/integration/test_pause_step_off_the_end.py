"""A session a pause made ends as a breakpoint()'s does when `n` steps off the end of its
function: ``--Return--`` with the value, not a stop in the thread's next call (a Ray
worker's next task; here a thread pool's). A real hub, a real live-linked process, a real
``raydebug attach`` on a pseudo-terminal."""

from __future__ import annotations

from pathlib import Path

import pytest

from devtools.terminal import PROMPT, Attach, start_attach
from helpers import HubProcess, finish, line_of, raydebug, read_line, write_script

pytestmark = pytest.mark.integration

# As a Ray worker: one thread runs one task after another; the first waits in C for a value.
TASKS = """
import os, queue, time
from concurrent.futures import ThreadPoolExecutor
from raydebug.agent import start_live_link

start_live_link()

values = queue.Queue()

def task():
    value = values.get()  # blocked in C until a value is put
    doubled = value * 2
    return doubled  # last line

def next_task():
    reached = "next task"
    return reached

with ThreadPoolExecutor(1, thread_name_prefix="tasks") as pool:
    first = pool.submit(task)
    second = pool.submit(next_task)
    print("started", os.getpid(), flush=True)
    while not second.done():
        time.sleep(0.01)
    print("results", first.result(), second.result(), flush=True)
"""


def test_next_off_the_end_of_a_paused_task_ends_its_session_with_its_value(
        hub: HubProcess, attach: list[Attach], tmp_path: Path):
    script = write_script(tmp_path, "tasks.py", TASKS)
    proc = hub.spawn_linked(script)
    assert read_line(proc).split() == ["started", str(proc.pid)]
    assert raydebug(hub, "pause", f"pid={proc.pid}").returncode == 0
    paused = {s["thread"]: s for s in hub.wait_sessions(2)}["tasks_0"]
    assert (paused["reason"], paused["function"]) == ("pause", "task"), paused
    assert paused["blocked_in_c"] is True, paused  # in values.get(), as the tryout's task

    term = start_attach(hub, attach, paused["id"], columns=200)
    term.expect(PROMPT)
    term.do("p values.put(42)")
    last = f"({line_of(script, 'last line')})task()"
    for _ in range(20):  # refused while still in C; back from it, two lines to go
        if last in term.do("where"):
            break
        term.do("n")
    assert last in term.do("where")
    ended = term.do("n")  # off the end: the session ends; the prompt moves to MainThread
    assert "--Return-- task() -> 84" in ended, ended
    assert "task() returned; the process runs on" in ended, ended
    assert "next_task" not in ended, ended
    term.do_and_end("q", "the process runs on")
    code, out, err = finish(proc)
    assert code == 0 and "results 84 next task" in out, err
