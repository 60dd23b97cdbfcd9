"""Several pauses in one process: threads at once, and breakpoints one after another."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from helpers import HubProcess, finish, run, write_script
from raydebug.client.dap import DapClient

pytestmark = pytest.mark.integration

THREADS = """
import threading

def work(name):
    mine = name
    breakpoint()
    print(f"{mine} done", flush=True)

threads = [threading.Thread(target=work, args=(f"t{i}",), name=f"worker-{i}") for i in range(2)]
for t in threads:
    t.start()
for t in threads:
    t.join()
print("all done", flush=True)
"""

TWICE = """
for round in range(2):
    breakpoint()
    print(f"round {round}", flush=True)
"""


async def top_function(client: DapClient, thread_id: int, timeout: float = 10.0) -> str:
    """Name of the thread's top frame once it is suspended.

    A released thread suspends at its next line a moment after the first stop is reported,
    with no event of its own; this bounded retry covers that moment.
    """
    deadline = asyncio.get_running_loop().time() + timeout
    while True:
        response = await client.request_response("stackTrace", {"threadId": thread_id})
        if response.success and response.body["stackFrames"]:
            return str(response.body["stackFrames"][0]["name"])
        if asyncio.get_running_loop().time() > deadline:
            raise TimeoutError(f"thread {thread_id} did not suspend: {response.message}")
        await asyncio.sleep(0.02)


def test_two_threads_paused_at_once(hub: HubProcess, tmp_path: Path):
    proc = hub.spawn(write_script(tmp_path, "threads.py", THREADS))
    sessions = hub.wait_sessions(2)
    assert {s["thread"] for s in sessions} == {"worker-0", "worker-1"}
    assert len({s["pid"] for s in sessions}) == 1

    async def scenario() -> None:
        client = await hub.dap()
        await client.attach(sessions[0]["id"])
        # pydevd is per process and sends one stopped event for all threads
        # (allThreadsStopped); both paused threads must show their frame in `work`.
        threads = (await client.request("threads"))["threads"]
        workers = [t["id"] for t in threads if t["name"].startswith("worker-")]
        assert len(workers) == 2
        for thread_id in workers:
            assert await top_function(client, thread_id) == "work"
        assert {s["state"] for s in hub.get("/api/sessions")} == {"attached"}
        await client.request("continue", {"threadId": workers[0]})  # resumes all threads
        await client.request("disconnect", {})
        await client.close()

    run(scenario())
    code, out, _ = finish(proc)
    assert code == 0 and "all done" in out and "t0 done" in out and "t1 done" in out
    assert hub.wait_sessions(0) == []


def test_a_later_breakpoint_registers_a_new_session_on_the_same_listener(
        hub: HubProcess, tmp_path: Path):
    proc = hub.spawn(write_script(tmp_path, "twice.py", TWICE))

    [first] = hub.wait_sessions(1)
    hub.attach_and_detach(first["id"])
    # the old session may linger for a moment: wait for the listing to change (a loop of
    # answers at once spun for 120 s under a loaded fresh-clone run)
    [second] = hub.wait_listing("/api/sessions", "the second breakpoint's session", lambda listed: [
        s for s in listed if s["id"] != first["id"]])
    assert second["pid"] == first["pid"]
    hub.attach_and_detach(second["id"])
    code, out, _ = finish(proc)
    assert code == 0 and "round 0" in out and "round 1" in out
