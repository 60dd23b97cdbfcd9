"""A group attach: every paused process as threads of one DAP session, no child sessions."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path

import pytest

from helpers import HubProcess, finish, run, write_script
from raydebug.client.dap import DapClient

pytestmark = pytest.mark.integration

WORKER = """
import os
import sys

def work(tag):
    breakpoint()  # pause here
    print(tag, "done", flush=True)  # written in pieces: tag, a space, done, a newline

work(sys.argv[1])
"""


def test_a_client_without_child_sessions_sees_every_paused_process_as_threads(
        hub: HubProcess, tmp_path: Path):
    script = write_script(tmp_path, "worker.py", WORKER)
    procs = {tag: hub.spawn(script, tag) for tag in ("a", "b", "c")}
    hub.wait_sessions(3)
    pids = {proc.pid for proc in procs.values()}

    async def scenario() -> None:
        client = await DapClient.connect(*hub.client)
        await client.initialize(supportsStartDebuggingRequest=False)
        attach = client.send_request("attach", {"name": "group", "redirectOutput": True,
                                                "raydebug": {"group": True}})
        await client.wait_event("initialized")
        assert (await attach).success
        await client.request("configurationDone")
        stopped = [await client.wait_event("stopped", timeout=60) for _ in pids]

        threads = (await client.request("threads"))["threads"]
        named = {int(match.group(1)) for thread in threads
                 if (match := re.search(r"pid (\d+)", thread["name"]))}
        assert named == pids

        procs["d"] = hub.spawn(script, "d")  # pauses later: it joins the same session
        stopped.append(await client.wait_event("stopped", timeout=60))
        pids.add(procs["d"].pid)
        threads = (await client.request("threads"))["threads"]
        pid_of = {thread["id"]: int(re.search(r"pid (\d+)", thread["name"]).group(1))
                  for thread in threads}
        assert set(pid_of.values()) == pids

        evaluated = set()
        for event in stopped:
            thread_id = event.body["threadId"]
            frames = (await client.request("stackTrace", {"threadId": thread_id}))["stackFrames"]
            assert frames[0]["name"] == "work"
            result = await client.request("evaluate", {
                "expression": "os.getpid()", "frameId": frames[0]["id"], "context": "repl"})
            assert int(result["result"]) == pid_of[thread_id]
            evaluated.add(int(result["result"]))
        assert evaluated == pids

        answer = await client.request("continue", {"threadId": stopped[0].body["threadId"]})
        assert answer["allThreadsContinued"] is True
        assert {event.body["threadId"] for event in stopped} <= set(pid_of)
        for proc in procs.values():  # resumed by the continue, before any disconnect
            assert await asyncio.to_thread(proc.wait, 60) == 0
        await asyncio.to_thread(hub.wait_processes, "the processes gone", lambda ps: not any(
            p["pid"] in pids for p in ps))
        assert (await client.request("threads"))["threads"] == []  # (after any output)
        # the group had processes: it does not say it has none yet once they are gone
        assert [e for e in client.events("output") if "no process" in e.body["output"]] == []
        # each process's pieces reach the client as one line, whole, prefixed
        said = sorted(e.body["output"] for e in client.events("output")
                      if "done" in e.body["output"])
        assert said == sorted(f"[pid {proc.pid}] {tag} done\n" for tag, proc in procs.items())
        assert client.reverse_requests == []  # no startDebugging
        await client.request("disconnect", {})
        await client.close()

    run(scenario(), timeout=120)
    for tag, proc in procs.items():
        code, out, _ = finish(proc)
        assert code == 0 and f"{tag} done" in out


def test_a_selector_groups_only_the_processes_it_matches(hub: HubProcess, tmp_path: Path):
    script = write_script(tmp_path, "worker.py", WORKER)
    chosen, other = hub.spawn(script, "chosen"), hub.spawn(script, "other")
    hub.wait_sessions(2)

    async def scenario() -> None:
        client = await DapClient.connect(*hub.client)
        await client.initialize(supportsStartDebuggingRequest=False)
        refused = await client.request_response("attach", {"raydebug": {"group": "pid=abc"}})
        assert not refused.success and "pid=abc" in (refused.message or "")
        attach = client.send_request("attach", {
            "name": "group", "raydebug": {"group": f"pid={chosen.pid}"}})
        await client.wait_event("initialized")
        assert (await attach).success
        await client.request("configurationDone")
        stopped = await client.wait_event("stopped", timeout=60)
        threads = (await client.request("threads"))["threads"]
        assert {f"pid {chosen.pid}" in thread["name"] for thread in threads} == {True}
        states = {s["pid"]: s["state"] for s in hub.get("/api/sessions")}
        assert states == {chosen.pid: "attached", other.pid: "waiting"}
        await client.request("continue", {"threadId": stopped.body["threadId"]})
        assert await asyncio.to_thread(chosen.wait, 60) == 0
        await client.request("disconnect", {})
        await client.close()

    run(scenario(), timeout=120)
    # The other is still paused for the next client.
    [waiting] = hub.wait_sessions(1)
    assert waiting["pid"] == other.pid and hub.evaluate_and_detach(waiting["id"], "1 + 1") == "2"
    assert finish(chosen)[0] == 0 and finish(other)[0] == 0
