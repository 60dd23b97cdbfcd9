"""A paused process's thread blocked in C is a session now: read, evaluated in, unblocked,
then an ordinary stop at its next line; continue, and the program completes."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from devtools.pythons import SOURCE, python_for
from devtools.terminal import PROMPT, Attach
from helpers import (
    BLOCKED_WORKER,
    TIMEOUT,
    HubProcess,
    finish,
    line_of,
    locals_of,
    raydebug,
    read_line,
    run,
    top_frame,
    write_script,
)
from raydebug.session import BLOCKED_IN_C

pytestmark = pytest.mark.integration

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
    (now,) = hub.wait_listing("/api/sessions", "the napper's session leaves C", lambda listed: [
        s for s in listed if s["id"] == napping["id"] and not s["blocked_in_c"]])
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
