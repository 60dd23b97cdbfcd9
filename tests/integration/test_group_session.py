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
    print(f"{tag} done", flush=True)

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
        attach = client.send_request("attach", {"name": "group", "raydebug": {"group": True}})
        await client.wait_event("initialized")
        assert (await attach).success
        await client.request("configurationDone")
        stopped = [await client.wait_event("stopped", timeout=60) for _ in pids]

        threads = (await client.request("threads"))["threads"]
        named = {int(match.group(1)) for thread in threads
                 if (match := re.search(r"pid (\d+)", thread["name"]))}
        assert named == pids
        pid_of = {thread["id"]: int(re.search(r"pid (\d+)", thread["name"]).group(1))
                  for thread in threads}

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
        for proc in procs.values():  # resumed by the continue, before any disconnect
            assert await asyncio.to_thread(proc.wait, 60) == 0
        assert client.reverse_requests == []  # no startDebugging
        await client.request("disconnect", {})
        await client.close()

    run(scenario(), timeout=120)
    for tag, proc in procs.items():
        code, out, _ = finish(proc)
        assert code == 0 and f"{tag} done" in out
