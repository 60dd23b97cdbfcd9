"""`raydebug ps`, `stacks` and `pause` as a user meets them, against a real hub and four real
linked processes (RAYDEBUG_LIVE=1, RANK 0-3): three loop in one function, rank 3 waits on a
lock. In a real terminal at 120, 80 and 60 columns, and as JSON."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from devtools.terminal import on_a_terminal  # a pseudo-terminal of a given width
from helpers import TIMEOUT, HubProcess, evaluate_and_continue, run, start_hub, write_script
from raydebug.outside_stacks import py_spy_path

pytestmark = pytest.mark.integration

RAYDEBUG = [sys.executable, "-m", "raydebug"]

RANKED = """
import os, threading, time

def spin():
    total = 0
    while True:
        total += 1
        time.sleep(0.01)

def wait_for(lock):
    lock.acquire()  # the straggler: blocked in C, forever

if os.environ["RANK"] == "3":
    lock = threading.Lock()
    lock.acquire()
    wait_for(lock)
else:
    spin()
"""

PROCESS_KEYS = {"id", "pid", "host", "argv", "state", "sessions", "labels", "since", "parent",
                "job_id", "node_id", "node_ip", "worker_id", "actor_class", "task_name"}


@pytest.fixture(scope="module")
def ranks(tmp_path_factory: pytest.TempPathFactory) -> Iterator[HubProcess]:
    """A hub with four linked ranks, shared by the module's tests (none leaves one paused)."""
    hub = start_hub()
    try:
        script = write_script(tmp_path_factory.mktemp("ranks"), "ranked.py", RANKED)
        for rank in range(4):
            hub.spawn(script, RAYDEBUG_LIVE="1", RANK=str(rank), WORLD_SIZE="4")
        hub.wait_processes("the four ranks link", lambda ps: len(ps) >= 4)
        yield hub
    finally:
        hub.close()


def raydebug(hub: HubProcess, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*RAYDEBUG, *args, "--hub", hub.client_address],
                          capture_output=True, text=True, timeout=TIMEOUT,
                          env={**os.environ, "NO_COLOR": "1"})


def test_ps_json_lists_the_four_running_processes(ranks: HubProcess):
    done = raydebug(ranks, "ps", "--json")
    assert done.returncode == 0, done.stderr
    processes: list[dict[str, Any]] = json.loads(done.stdout)
    assert len(processes) == 4
    assert all(set(p) >= PROCESS_KEYS for p in processes), processes
    assert sorted(p["labels"]["RANK"] for p in processes) == ["0", "1", "2", "3"]
    assert {p["state"] for p in processes} == {"running"}
    assert all(p["sessions"] == [] for p in processes)
    assert {p["pid"] for p in processes} == {w.pid for w in ranks.workers}

    only = json.loads(raydebug(ranks, "ps", "--json", "rank=1-2").stdout)
    assert sorted(p["labels"]["RANK"] for p in only) == ["1", "2"]


def test_raydebug_commands_run_where_live_is_exported_do_not_list_themselves(ranks: HubProcess):
    # The hub's banner tells users to export these in the shell they then run `ps` from; the
    # command's own link would register while it asks (it did: `ps` listed itself).
    script = Path(sys.executable).with_name("raydebug")
    for command in ([str(script)], RAYDEBUG):
        done = subprocess.run([*command, "ps", "--json", "--hub", ranks.client_address],
                              capture_output=True, text=True, timeout=TIMEOUT,
                              env=ranks.env(RAYDEBUG_LIVE="1"))
        assert done.returncode == 0, done.stderr
        listed = {p["pid"] for p in json.loads(done.stdout)}
        assert listed == {w.pid for w in ranks.workers}, done.stdout


@pytest.mark.parametrize("columns", [120, 80, 60])
def test_ps_is_one_line_a_process_that_fits_the_terminal(ranks: HubProcess, columns: int):
    shown = on_a_terminal("ps", "--hub", ranks.client_address, columns=columns)
    lines = shown.rstrip("\n").splitlines()
    assert lines[0] == f"4 live processes on the hub at {ranks.client_address}", shown
    assert len(lines) == 6 and all(len(line) <= columns for line in lines), shown
    header = lines[1].split()
    assert header[:2] == ["id", "pid"] and "rank" in header and "state" in header, shown
    assert "sessions" not in header, shown  # empty for every process
    for line, rank in zip(lines[2:], "0123", strict=True):  # in rank order
        assert " running" in line and f" {rank} " in line, shown


@pytest.mark.parametrize("columns", [120, 80, 60])
def test_stacks_set_the_straggler_apart(ranks: HubProcess, columns: int):
    shown = on_a_terminal("stacks", "--hub", ranks.client_address, columns=columns)
    lines = shown.rstrip("\n").splitlines()
    assert lines[0] == f"4 processes on the hub at {ranks.client_address}", shown
    assert all(len(line) <= columns for line in lines), shown
    module = next(line for line in lines if "<module>" in line)
    assert module.split()[0] == "4", shown  # all four share the outermost frame
    spin = next(i for i, line in enumerate(lines) if " spin " in line)
    wait_for = next(i for i, line in enumerate(lines) if " wait_for " in line)
    assert lines[spin].split()[0] == "3" and lines[wait_for].split()[0] == "1", shown
    assert "← 3 processes here: ranks 0-2" in " ".join(lines[spin:spin + 2]), shown
    assert "← 1 process here: rank 3" in " ".join(lines[wait_for:wait_for + 2]), shown
    assert "ranked.py" in lines[wait_for], shown


def test_stacks_json_and_locals(ranks: HubProcess):
    done = raydebug(ranks, "stacks", "--json", "--locals", "rank=0,3")
    assert done.returncode == 0, done.stderr
    answer = json.loads(done.stdout)
    assert len(answer["processes"]) == 2
    assert all(entry["answered"] for entry in answer["processes"])
    tree = answer["tree"]
    assert tree["count"]["processes"] == 2 and tree["not_answering"] == []
    leaves = [tree["root"]]
    while any(node["children"] for node in leaves):
        leaves = [child for node in leaves for child in node["children"] or [node]]
    assert sorted((leaf["function"], leaf["ranks"]) for leaf in leaves) == [
        ("spin", [0]), ("wait_for", [3])]
    spin = next(leaf for leaf in leaves if leaf["function"] == "spin")
    assert "total" in spin["locals"], spin

    shown = raydebug(ranks, "stacks", "--locals", "rank=3").stdout
    assert re.search(r"lock = <unlocked _thread.lock|lock = <locked _thread.lock", shown), shown


@pytest.mark.parametrize("command", ["ps", "stacks", "pause", "continue"])
def test_a_selector_that_matches_nothing_says_what_there_is(ranks: HubProcess, command: str):
    done = raydebug(ranks, command, "rank=9")
    assert done.returncode == 1, done
    lines = done.stderr.splitlines()
    assert lines[0] == (f"raydebug: no process matches rank=9 on the hub at {ranks.client_address} "
                        "(--hub)"), done.stderr
    assert len(lines) == 5 and all(line.startswith("  p") for line in lines[1:]), done.stderr
    assert sorted(re.search(r"RANK=(\d)", line).group(1)  # type: ignore[union-attr]
                  for line in lines[1:]) == ["0", "1", "2", "3"], done.stderr
    assert done.stdout == ""


def test_pause_needs_a_selector_and_a_malformed_term_is_one_line(ranks: HubProcess):
    done = raydebug(ranks, "pause")
    assert done.returncode == 2 and "pause needs at least one SELECTOR term" in done.stderr
    bad = raydebug(ranks, "stacks", "rank=x")
    assert bad.returncode == 1, bad
    assert bad.stderr.startswith("raydebug: selector term 'rank=x'"), bad.stderr
    assert len(bad.stderr.splitlines()) == 1


def test_pause_one_rank_prints_its_session_and_it_runs_on_after(ranks: HubProcess):
    done = raydebug(ranks, "pause", "rank=1")
    assert done.returncode == 0, done.stderr
    (session,) = ranks.wait_sessions(1)
    assert session["reason"] == "pause"
    assert done.stdout == (f"paused {session['process']}: session {session['id']} "
                           f"(raydebug attach {session['id']})\n")
    again = raydebug(ranks, "pause", "rank=1")
    assert again.stdout == f"{session['process']} was paused already\n", again
    listed = json.loads(raydebug(ranks, "ps", "--json", "rank=1").stdout)
    assert listed[0]["state"] == "paused" and listed[0]["sessions"] == [session["id"]]
    ranks.attach_and_detach(session["id"])
    ranks.wait_sessions(0)


def test_help_has_examples():
    for command in ("ps", "stacks", "pause"):
        done = subprocess.run([*RAYDEBUG, command, "--help"], capture_output=True, text=True,
                              timeout=TIMEOUT)
        assert done.returncode == 0 and f"raydebug {command} " in done.stdout, done.stdout
        assert "SELECTOR terms are KEY=VALUE" in done.stdout


HOLDS_THE_GIL = """
import os, re, sys, time

def loop():
    while not os.path.exists(sys.argv[1]):
        time.sleep(0.01)
    # Catastrophic backtracking: one C call that holds the GIL for minutes.
    re.match(r"(a*)*b", "a" * 40)

loop()
"""


@contextmanager
def holding_the_gil(tmp_path: Path) -> Iterator[tuple[HubProcess, subprocess.Popen[str]]]:
    """A hub with two linked processes: rank 0 spins in Python, rank 1 holds its GIL in C
    (the regex) and so answers no more (waited for here)."""
    with start_hub() as hub:
        flag = tmp_path / "go"
        busy = hub.spawn(write_script(tmp_path, "busy.py", HOLDS_THE_GIL), str(flag),
                         RAYDEBUG_LIVE="1", RANK="1")
        hub.spawn(write_script(tmp_path, "ranked.py", RANKED), RAYDEBUG_LIVE="1", RANK="0")
        hub.wait_processes("the processes link", lambda ps: len(ps) >= 2)
        deadline = time.monotonic() + TIMEOUT
        flag.touch()
        # The regex starts once the loop sees the flag; until then the process answers.
        while hub.get(f"/api/stacks?pid={busy.pid}&timeout=0.5")["processes"][0]["answered"]:
            assert time.monotonic() < deadline, "the busy process kept answering"
        yield hub, busy


def test_a_process_that_cannot_answer_is_listed_apart_with_why(tmp_path):
    with holding_the_gil(tmp_path) as (hub, _):
        started = time.monotonic()
        shown = raydebug(hub, "stacks", "--timeout", "1")
        assert time.monotonic() - started < TIMEOUT / 2
        assert shown.returncode == 0, shown.stderr
        lines = shown.stdout.splitlines()
        assert lines[0] == f"1 process, 1 did not answer, on the hub at {hub.client_address}"
        assert any(" spin " in line and "← 1 process here: rank 0" in line for line in lines)
        assert "did not answer: 1 process: rank 1: no answer within 1s" in \
            " ".join(line.strip() for line in lines), shown.stdout


@pytest.mark.skipif(py_spy_path() is None, reason="py-spy is not installed")
def test_stacks_native_reads_a_process_that_cannot_answer_from_outside(tmp_path):
    """`stacks --native`: py-spy reads the process holding its GIL in C; its Python frames
    and the C ones it runs join the tree, marked as read from outside (raydebug's own link
    thread left out); the one that answered is as before."""
    with holding_the_gil(tmp_path) as (hub, busy):
        shown = raydebug(hub, "stacks", "--native", "--timeout", "1")
        assert shown.returncode == 0, shown.stderr
        assert shown.stderr == "", shown.stderr
        lines = shown.stdout.splitlines()
        assert lines[0] == (f"2 processes, 1 read from outside, on the hub at "
                            f"{hub.client_address}"), shown.stdout
        assert any(" spin " in line and "← 1 process here: rank 0" in line for line in lines)
        loop = next(i for i, line in enumerate(lines) if " loop " in line)
        assert "busy.py:" in lines[loop], shown.stdout
        below = " ".join(lines[loop + 1:])
        assert " match " in below and ".so" in below, shown.stdout  # re.match, then C
        assert "← 1 process here: rank 1 (read from outside by py-spy)" in below, shown.stdout
        assert "did not answer" not in shown.stdout and "raydebug" not in below, shown.stdout
        answer = json.loads(raydebug(hub, "stacks", "--native", "--json", "--timeout", "1",
                                     f"pid={busy.pid}").stdout)
        (entry,) = answer["processes"]
        assert entry["answered"] and entry["outside"] == "py-spy", entry
        assert [t["name"] for t in entry["threads"]] == ["MainThread"], entry


def test_pausing_a_main_thread_blocked_in_c_stops_it_where_it_waits(ranks: HubProcess):
    """The hang a user pauses is a thread blocked in C (rank 3's lock, forever): raydebug's
    signal brings its main thread back to Python, and it stops at the blocked line, its locals
    readable. `continue` lets it wait again, running (the module's ranks stay unpaused)."""
    (listed,) = json.loads(raydebug(ranks, "ps", "--json", "rank=3").stdout)
    done = raydebug(ranks, "pause", "--wait", "5", "rank=3")
    assert done.returncode == 0, done.stderr
    (session,) = ranks.get("/api/sessions")
    assert done.stdout == (f"paused {listed['id']}: session {session['id']} "
                           f"(raydebug attach {session['id']})\n"), done.stdout
    assert session["function"] == "wait_for" and session["reason"] == "pause"
    seen = run(evaluate_and_continue(*ranks.client, session["id"], "lock"))
    assert seen.result.startswith("<locked _thread.lock"), seen.result
    ranks.wait_sessions(0)
    (entry,) = ranks.get("/api/stacks?rank=3&timeout=5")["processes"]
    assert entry["threads"][0]["frames"][-1]["function"] == "wait_for"  # waiting again
