"""`raydebug attach --group SELECTOR` on a real pseudo-terminal, against a real hub and real
processes: ranks 0 and 1 paused in `breakpoint()` are two threads of one prompt; `n` steps
one while the other stays where it was; `c1` lets one process run on and moves to the
other; `c` lets every one run on, and a process that pauses later (rank 2) stops there."""

from __future__ import annotations

import re
from pathlib import Path

import pexpect
import pytest

from devtools.terminal import PROMPT, Attach, start_attach
from helpers import HubProcess, finish, raydebug, write_script

pytestmark = pytest.mark.integration

RANKED = """
import os

def step(rank):
    total = rank * 10
    breakpoint()
    total += 1
    total += 2
    return total

print(f"rank {os.environ['RANK']} ->", step(int(os.environ["RANK"])), flush=True)
"""


def test_a_group_is_one_prompt_whose_threads_are_its_processes(
        hub: HubProcess, tmp_path: Path, attach: list[Attach]):
    script = write_script(tmp_path, "ranked.py", RANKED)
    procs = [hub.spawn(script, RAYDEBUG_LIVE="1", RANK=str(rank)) for rank in range(2)]
    hub.wait_sessions(2)
    term = start_attach(hub, attach, "--group", "rank=0-3", columns=100)
    start = term.expect(PROMPT)
    assert "group session (rank=0-3): 2 threads stopped in 2 processes" in start, start
    assert f"(rank 0 · pid {procs[0].pid} · MainThread)" in start, start

    listed = term.do("threads")
    ids = {int(rank): int(thread) for thread, rank in
           re.findall(r"^[* ]\s+(\d+)  rank (\d) · pid \d+ · MainThread  step at ranked"
                      r"\.py:6\s*$", listed, re.MULTILINE)}
    assert set(ids) == {0, 1}, listed
    assert "> " in term.do("n") and term.do("p total").strip() == "1"
    other = term.do(f"thread {ids[1]}")
    assert f"thread {ids[1]} (rank 1 · pid {procs[1].pid} · MainThread)" in other, other
    assert term.do("p total, os.getpid()").strip() == f"(10, {procs[1].pid})"  # not stepped

    moved = term.do("c1")
    assert f"thread {ids[1]} (rank 1 · pid {procs[1].pid} · MainThread) runs on" in moved
    assert f"thread {ids[0]} (rank 0 · pid {procs[0].pid} · MainThread)" in moved, moved
    assert finish(procs[1])[:2] == (0, "rank 1 -> 13\n")

    term.child.sendline("c")  # rank 0 ends; nothing is stopped: it waits for a stop
    term.expect(f"thread {ids[0]} (rank 0 · pid {procs[0].pid} · MainThread) has exited")
    term.expect("waiting for the next stop")
    late = hub.spawn(script, RAYDEBUG_LIVE="1", RANK="2")
    joined = term.expect(PROMPT)
    assert f"(rank 2 · pid {late.pid} · MainThread)" in joined, joined
    assert term.do("p total").strip() == "20"
    assert finish(procs[0])[:2] == (0, "rank 0 -> 3\n")

    left = term.do_and_end("q", "every process of it runs on")
    assert "group session detached" in left
    term.child.expect(pexpect.EOF)
    assert "attach again" not in term.child.before  # q is no lost hub
    assert term.child.wait() == 0
    assert finish(late)[:2] == (0, "rank 2 -> 23\n")


def test_a_group_where_nothing_pauses_within_the_timeout_says_so(hub: HubProcess):
    done = raydebug(hub, "attach", "--group", "pid=1", "--timeout", "1")
    assert done.returncode == 1, done
    assert ("cannot attach to the group (pid=1): no process of it paused within 1 s"
            in done.stderr), done.stderr


def test_ctrl_d_while_the_group_waits_for_its_first_pause_stops_waiting(
        hub: HubProcess, attach: list[Attach]):
    term = start_attach(hub, attach, "--group", "pid=1")
    term.expect("to pause: `")  # and how to pause those that run
    term.expect(" pause pid=1` pauses those that run (Ctrl-C stops waiting)")
    term.child.sendline("p x")
    term.expect("nothing is paused yet: no command runs (Ctrl-C or Ctrl-D stops waiting)")
    term.child.sendeof()
    term.expect("stopped waiting for the group")
    term.child.expect(pexpect.EOF)
