"""Real processes paused at breakpoint(), a real hub, a scripted DAP client."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path

import pytest

from helpers import HubProcess, finish, line_of, listening_ports, run, write_script
from raydebug.client.dap import DapClient, DapRequestError

pytestmark = pytest.mark.integration

WORKER = """
import sys

def compute(a, b):
    total = a + b
    marker = sys.argv[1]
    breakpoint()  # pause here
    result = total * 2
    print(f"{marker} result={result} total={total}", flush=True)
    return result

compute(3, 4)
"""


@pytest.fixture
def worker_script(tmp_path: Path) -> Path:
    return write_script(tmp_path, "worker.py", WORKER)


async def inspect_stopped(client: DapClient, script: Path, marker: str) -> int:
    """Check the stop is on the user's line with the user's locals; return the thread id."""
    threads = (await client.request("threads"))["threads"]
    assert threads, "no threads reported"
    thread_id = threads[0]["id"]
    frames = (await client.request("stackTrace", {"threadId": thread_id}))["stackFrames"]
    top = frames[0]
    assert Path(top["source"]["path"]).resolve() == script.resolve()
    assert top["line"] == line_of(script, "pause here") + 1
    assert top["name"] == "compute"
    scopes = (await client.request("scopes", {"frameId": top["id"]}))["scopes"]
    variables = (await client.request(
        "variables", {"variablesReference": scopes[0]["variablesReference"]}))["variables"]
    values = {v["name"]: v["value"] for v in variables}
    assert values["total"] == "7"
    assert values["marker"] == repr(marker)
    result = await client.request(
        "evaluate", {"expression": "total * 10", "frameId": top["id"], "context": "repl"})
    assert result["result"] == "70"
    return int(thread_id)


def test_two_processes_are_listed_with_their_metadata(hub: HubProcess, worker_script: Path):
    first = hub.spawn(worker_script, "A", RANK="3", LOCAL_RANK="1")
    second = hub.spawn(worker_script, "B")
    sessions = hub.wait_sessions(2)
    by_pid = {s["pid"]: s for s in sessions}
    assert set(by_pid) == {first.pid, second.pid}
    session = by_pid[first.pid]
    assert session["state"] == "waiting"
    assert session["reason"] == "breakpoint"
    assert session["exception"] is None
    assert Path(session["file"]).resolve() == worker_script.resolve()
    assert session["line"] == line_of(worker_script, "pause here")
    assert session["function"] == "compute"
    assert session["labels"] == {"RANK": "3", "LOCAL_RANK": "1"}  # as the process's
    assert session["thread"] == "MainThread"
    assert session["source"].startswith("breakpoint()")

    listed = subprocess.run(
        [sys.executable, "-m", "raydebug", "list", "--hub", hub.client_address, "--json"],
        capture_output=True, text=True, timeout=30, check=True)
    assert {s["id"] for s in json.loads(listed.stdout)} == {s["id"] for s in sessions}
    table = subprocess.run(
        [sys.executable, "-m", "raydebug", "list", "--hub", hub.client_address],
        capture_output=True, text=True, timeout=30, check=True, env={"COLUMNS": "200"})
    assert "2 paused sessions" in table.stdout
    for s in sessions:
        assert s["id"] in table.stdout


def test_attach_to_each_in_turn(hub: HubProcess, worker_script: Path):
    procs = {"A": hub.spawn(worker_script, "A"), "B": hub.spawn(worker_script, "B")}
    sessions = hub.wait_sessions(2)

    async def debug(session_id: str, marker: str) -> None:
        client = await hub.dap()
        stopped = await client.attach(session_id)
        assert stopped.body["reason"] == "breakpoint"
        thread_id = await inspect_stopped(client, worker_script, marker)
        await client.request("next", {"threadId": thread_id})
        await client.wait_event("stopped", reason="step")
        frames = (await client.request("stackTrace", {"threadId": thread_id}))["stackFrames"]
        assert frames[0]["line"] == line_of(worker_script, "pause here") + 2
        await client.request("continue", {"threadId": thread_id})
        await client.request("disconnect", {})
        await client.close()

    for session in sessions:
        marker = next(m for m, p in procs.items() if p.pid == session["pid"])
        run(debug(session["id"], marker))
        code, out, _err = finish(procs[marker])
        assert code == 0
        assert f"{marker} result=14 total=7" in out


def test_attach_to_both_at_once(hub: HubProcess, worker_script: Path):
    procs = {"A": hub.spawn(worker_script, "A"), "B": hub.spawn(worker_script, "B")}
    sessions = {s["pid"]: s["id"] for s in hub.wait_sessions(2)}

    async def both() -> None:
        clients = {m: await hub.dap() for m in procs}
        await asyncio.gather(*(clients[m].attach(sessions[procs[m].pid]) for m in procs))
        assert {s["state"] for s in hub.get("/api/sessions")} == {"attached"}
        thread_ids = {m: await inspect_stopped(clients[m], worker_script, m) for m in procs}
        # Change a local in A only: its output shows the change, B's does not.
        frames = (await clients["A"].request(
            "stackTrace", {"threadId": thread_ids["A"]}))["stackFrames"]
        await clients["A"].request("evaluate", {"expression": "total = 100",
                                                "frameId": frames[0]["id"], "context": "repl"})
        for m, client in clients.items():
            await client.request("continue", {"threadId": thread_ids[m]})
            await client.request("disconnect", {})
            await client.close()

    run(both())
    assert "A result=200 total=100" in finish(procs["A"])[1]
    assert "B result=14 total=7" in finish(procs["B"])[1]
    assert hub.wait_sessions(0) == []


def test_attach_without_a_session_takes_the_oldest_or_waits(hub: HubProcess,
                                                            worker_script: Path):
    async def attach_first() -> None:
        client = await hub.dap()
        attaching = asyncio.ensure_future(client.attach())
        await client.wait_event("output")  # "waiting for a breakpoint..."
        proc = hub.spawn(worker_script, "late")
        stopped = await attaching
        assert stopped.body["reason"] == "breakpoint"
        [session] = hub.get("/api/sessions")
        assert session["pid"] == proc.pid and session["state"] == "attached"
        await client.request("disconnect", {})  # resumes the worker, as debugpy does
        await client.close()
        code, out, _ = finish(proc)
        assert code == 0 and "late result=14" in out

    run(attach_first())


def test_a_second_client_is_refused_and_unknown_ids_are_explained(hub: HubProcess,
                                                                  worker_script: Path):
    proc = hub.spawn(worker_script, "A")
    [session] = hub.wait_sessions(1)

    async def scenario() -> None:
        first = await hub.dap()
        await first.attach(session["id"])
        second = await hub.dap()
        with pytest.raises(DapRequestError, match="already being debugged"):
            await second.attach(session["id"])
        third = await hub.dap()
        with pytest.raises(DapRequestError, match=f"no session 'nope'.*{session['id']}"):
            await third.attach("nope")
        await first.request("disconnect", {})
        for client in (first, second, third):
            await client.close()

    run(scenario())
    assert finish(proc)[0] == 0


def test_killed_worker_disappears_and_its_client_is_told(hub: HubProcess, worker_script: Path):
    attached = hub.spawn(worker_script, "A")
    waiting = hub.spawn(worker_script, "B")
    sessions = {s["pid"]: s["id"] for s in hub.wait_sessions(2)}

    async def scenario() -> None:
        client = await hub.dap()
        await client.attach(sessions[attached.pid])
        waiting.kill()
        assert [s["pid"] for s in hub.wait_sessions(1)] == [attached.pid]
        attached.kill()
        await client.wait_event("terminated", timeout=5)
        assert hub.wait_sessions(0) == []
        await client.close()

    run(scenario())
    assert hub.get("/api/health")["status"] == "ok"


def test_a_paused_process_listens_on_no_port(hub: HubProcess, worker_script: Path):
    proc = hub.spawn(worker_script, "A")
    [session] = hub.wait_sessions(1)

    async def attached() -> None:
        client = await hub.dap()
        await client.attach(session["id"])
        # Paused and debugged: still nothing listens in the worker (debugpy would).
        assert listening_ports(proc.pid) == []
        await client.request("disconnect", {})
        await client.close()

    assert listening_ports(proc.pid) == []
    run(attached())
    assert finish(proc)[0] == 0


THROUGH_PYDEVDS_HOOK = """
import os, sys
import debugpy
sys.path.insert(0, os.path.join(os.path.dirname(debugpy.__file__), "_vendored", "pydevd"))
import pydevd  # installs pydevd's breakpointhook, as it does while raydebug starts it

def work():
    mine = 7
    breakpoint()  # stops here
    return mine

assert sys.breakpointhook.__name__ == "pydevd_breakpointhook"
print("result", work(), flush=True)
"""


def test_a_breakpoint_through_pydevds_own_hook_stops_at_the_users_line(hub: HubProcess,
                                                                       tmp_path: Path):
    """Importing pydevd installs its breakpointhook, which raydebug replaces by its own once
    pydevd has started; a thread calling breakpoint() meanwhile goes through pydevd's hook,
    which hands PYTHONBREAKPOINT's on. Found in a loaded run (eight threads of a Ray actor
    at once): the session stopped one frame too deep, at pydevd.py:198."""
    script = write_script(tmp_path, "through_pydevd.py", THROUGH_PYDEVDS_HOOK)
    proc = hub.spawn(script)
    [session] = hub.wait_sessions(1)
    assert (session["file"], session["line"], session["function"]) == (
        str(script), line_of(script, "stops here"), "work"), session
    run(evaluate_and_continue_session(hub, session["id"]))
    code, out, err = finish(proc)
    assert code == 0 and "result 7" in out, (out, err)


async def evaluate_and_continue_session(hub: HubProcess, session_id: str) -> None:
    from helpers import evaluate_and_continue

    host, port = hub.client_address.rsplit(":", 1)
    seen = await evaluate_and_continue(host, int(port), session_id, "mine", timeout=30)
    assert seen.result == "7", seen.result
