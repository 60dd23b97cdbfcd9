"""A paused process's thread blocked in C is a session now: read, evaluated in, unblocked,
then an ordinary stop at its next line; continue, and the program completes."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from test_terminal import PROMPT, Attach

from helpers import (
    TIMEOUT,
    HubProcess,
    find_python,
    finish,
    line_of,
    read_line,
    run,
    venv_with_debugpy,
    write_script,
)
from raydebug.client.dap import DapClient
from raydebug.session import BLOCKED_IN_C

pytestmark = pytest.mark.integration

BLOCKED_WORKER = """
import os, threading, time
from raydebug.agent import start_live_link

start_live_link()  # as RAYDEBUG_LIVE=1 does where raydebug's .pth is installed (not 3.12's)

done = threading.Event()

def worker():
    waiting_for = "done"
    done.wait()  # blocked in C until the event is set
    after = waiting_for + " was set"
    print("worker:", after, flush=True)

thread = threading.Thread(target=worker, name="blocked-worker")
thread.start()
print("started", os.getpid(), flush=True)
total = 0
while thread.is_alive():
    total += 1
    time.sleep(0.01)
print("finished", total > 0, flush=True)
"""


SOURCE = Path(__file__).resolve().parents[2] / "src"


def python_for(version: str) -> str:
    """This venv's Python for 3.11; another one's, with debugpy, for the others."""
    if version == f"{sys.version_info.major}.{sys.version_info.minor}":
        return sys.executable
    found = find_python(version)
    if found is None:
        pytest.skip(f"no Python {version} here")
    return venv_with_debugpy(found)


def raydebug(hub: HubProcess, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "raydebug", *args, "--hub", hub.client_address],
                          capture_output=True, text=True, timeout=TIMEOUT,
                          env={**os.environ, "NO_COLOR": "1", "COLUMNS": "160"})


async def top_frame(client: DapClient, thread_id: int) -> dict[str, Any]:
    frames = await client.request("stackTrace", {"threadId": thread_id})
    return dict(frames["stackFrames"][0])


async def locals_of(client: DapClient, frame_id: int) -> dict[str, str]:
    scopes = await client.request("scopes", {"frameId": frame_id})
    local = next(s for s in scopes["scopes"] if s["name"] == "Locals")
    variables = await client.request("variables",
                                     {"variablesReference": local["variablesReference"]})
    return {v["name"]: v["value"] for v in variables["variables"]}


@pytest.mark.parametrize("version", ["3.11", "3.12"])
def test_a_thread_blocked_in_c_is_debugged_until_it_returns(hub: HubProcess, tmp_path: Path,
                                                            version: str):
    script = write_script(tmp_path, "blocked.py", BLOCKED_WORKER)
    waits, after = line_of(script, "done.wait()"), line_of(script, "after = ")
    proc = hub.spawn_linked(script, python_for(version), PYTHONPATH=str(SOURCE))
    assert read_line(proc).split() == ["started", str(proc.pid)]

    paused = raydebug(hub, "pause", f"pid={proc.pid}")
    assert paused.returncode == 0, paused.stderr
    sessions = {s["thread"]: s for s in hub.wait_sessions(2)}
    blocked = sessions["blocked-worker"]
    assert blocked["reason"] == "pause" and blocked["blocked_in_c"] is True, blocked
    assert (blocked["function"], blocked["line"]) == ("worker", waits), blocked
    assert sessions["MainThread"]["blocked_in_c"] is False
    # Its pause request is still pending (blocked): it stops when the wait returns.
    (process,) = [p for p in hub.get("/api/processes") if p["pid"] == proc.pid]
    assert process["pause_requested"]["threads"] == 1, process
    listed = raydebug(hub, "list")
    row = next(line for line in listed.stdout.splitlines() if blocked["id"] in line)
    assert "blocked in C" in row, listed.stdout

    async def scenario() -> None:
        client = await hub.dap()
        first = await client.attach(blocked["id"])
        threads = (await client.request("threads"))["threads"]
        worker = next(t["id"] for t in threads if t["name"] == "blocked-worker")
        if first.body["threadId"] != worker:  # each suspended thread is told of
            await client.wait_event("stopped", threadId=worker)
        top = await top_frame(client, worker)
        assert (top["name"], top["line"]) == ("worker", waits), top
        assert (await locals_of(client, top["id"]))["waiting_for"] == "'done'"

        refused = await client.request_response("next", {"threadId": worker})
        assert not refused.success and "blocked in C" in (refused.message or ""), refused

        await client.request("evaluate", {  # on raydebug's thread, in the blocked frame
            "expression": "done.set()", "frameId": top["id"], "context": "repl"})
        await client.wait_event("continued", threadId=worker)  # its stand-in left
        stopped = await client.wait_event("stopped", threadId=worker)
        assert stopped.body["reason"] == "pause", stopped.body
        top = await top_frame(client, worker)
        assert (top["name"], top["line"]) == ("worker", after), top
        (again,) = [s for s in hub.get("/api/sessions") if s["id"] == blocked["id"]]
        assert again["blocked_in_c"] is False and again["line"] == after, again
        (process,) = [p for p in hub.get("/api/processes") if p["pid"] == proc.pid]
        assert process.get("pause_requested") is None, process  # it stopped: met

        await client.request("continue", {"threadId": worker})
        await client.request("disconnect", {})
        await client.close()

    run(scenario(), TIMEOUT)
    code, out, err = finish(proc)
    assert code == 0, err
    assert "worker: done was set" in out and "finished True" in out, out
    assert f"session {blocked['id']}: its call returned; paused at " in err, err


def test_the_terminal_says_what_blocked_in_c_means(hub: HubProcess, tmp_path: Path):
    script = write_script(tmp_path, "blocked.py", BLOCKED_WORKER)
    after = line_of(script, "after = ")
    proc = hub.spawn_linked(script)
    assert read_line(proc).split() == ["started", str(proc.pid)]
    assert raydebug(hub, "pause", f"pid={proc.pid}").returncode == 0
    sessions = {s["thread"]: s for s in hub.wait_sessions(2)}
    term = Attach(hub, sessions["blocked-worker"]["id"], columns=200)
    try:
        header = term.expect(PROMPT)
        assert BLOCKED_IN_C in header, header
        assert "*** the thread is blocked in C" in term.do("n")
        term.do("p done.set()")
        # back from C: stopped at its next line (where says so once it has; it is quick)
        deadline = time.monotonic() + TIMEOUT
        while f"({after})worker()" not in term.do("where"):
            assert time.monotonic() < deadline, "the thread did not stop after its wait"
        assert "waiting_for = 'done'" in term.do("p f'{waiting_for = }'")
        term.do_and_end("q", "the process runs on")  # detached: every thread runs on
    finally:
        term.close()
    code, out, err = finish(proc)
    assert code == 0 and "finished True" in out, err


NAPPING_WORKER = """
import os, threading, time
from raydebug.agent import start_live_link

start_live_link()

def worker():
    time.sleep(float(os.environ["NAP"]))  # in C until the nap ends: nobody has to help
    woke = True
    print("worker woke", woke, flush=True)

thread = threading.Thread(target=worker, name="napper")
thread.start()
print("started", os.getpid(), flush=True)
while thread.is_alive():
    time.sleep(0.01)
print("finished", flush=True)
"""


@pytest.mark.parametrize("version", ["3.11", "3.12"])
def test_a_thread_that_returns_unattended_becomes_an_ordinary_session(hub: HubProcess,
                                                                      tmp_path: Path,
                                                                      version: str):
    """No client attached: the call returns by itself; the same session now says where the
    thread stopped (its next line), not blocked; an attach finds it there, and it steps."""
    script = write_script(tmp_path, "napping.py", NAPPING_WORKER)
    proc = hub.spawn_linked(script, python_for(version), PYTHONPATH=str(SOURCE), NAP="3")
    assert read_line(proc).split() == ["started", str(proc.pid)]
    assert raydebug(hub, "pause", f"pid={proc.pid}").returncode == 0
    napping = {s["thread"]: s for s in hub.wait_sessions(2)}["napper"]
    assert napping["blocked_in_c"] is True, napping
    woke = line_of(script, "woke = True")
    deadline = time.monotonic() + TIMEOUT
    while True:  # the hub has no wait for a changed record: asked, bounded
        (now,) = [s for s in hub.get("/api/sessions") if s["id"] == napping["id"]]
        if not now["blocked_in_c"]:
            break
        assert time.monotonic() < deadline, now
        time.sleep(0.1)
    assert now["line"] == woke and now["function"] == "worker", now

    async def attach_and_leave() -> None:
        client = await hub.dap()
        first = await client.attach(napping["id"])
        threads = (await client.request("threads"))["threads"]
        worker = next(t["id"] for t in threads if t["name"] == "napper")
        if first.body["threadId"] != worker:
            await client.wait_event("stopped", threadId=worker)
        top = await top_frame(client, worker)
        assert (top["name"], top["line"]) == ("worker", woke), top
        await client.request("next", {"threadId": worker})  # an ordinary thread: it steps
        await client.wait_event("stopped", threadId=worker)
        assert (await top_frame(client, worker))["line"] == woke + 1
        await client.request("disconnect", {})
        await client.close()

    run(attach_and_leave(), TIMEOUT)
    code, out, err = finish(proc)
    assert code == 0 and "worker woke True" in out and "finished" in out, err
