"""One IDE attach for the whole cluster: child sessions through startDebugging."""

from __future__ import annotations

from pathlib import Path

import pytest

from devtools.ide import IdeLikeClient
from helpers import HubProcess, finish, line_of, run, write_script
from raydebug.client.dap import DapRequestError

pytestmark = pytest.mark.integration

WORKER = """
import sys

def work(tag):
    value = len(tag)
    breakpoint()  # pause here
    value += 1
    value += 2  # parent breakpoint
    print(f"{tag} done {value}", flush=True)

work(sys.argv[1])
"""


def test_one_attach_shows_every_paused_worker_as_a_child(hub: HubProcess, tmp_path: Path):
    script = write_script(tmp_path, "worker.py", WORKER)
    procs = {tag: hub.spawn(script, tag) for tag in ("a", "bb", "ccc")}
    hub.wait_sessions(3)
    later_line = line_of(script, "parent breakpoint")

    async def scenario() -> None:
        ide = IdeLikeClient(hub)
        await ide.attach_cluster({str(script): [later_line]})
        for _ in range(3):
            await ide.next_child()
        procs["dddd"] = hub.spawn(script, "dddd")  # pauses later: a fourth child appears
        await ide.next_child()
        pids = {s["pid"] for s in hub.get("/api/sessions")}
        assert pids == {p.pid for p in procs.values()}
        assert {s["state"] for s in hub.get("/api/sessions")} == {"attached"}  # all open
        for child, configuration, thread_id in ide.children:
            assert configuration["name"].startswith("worker.py:")
            frames = await child.request("stackTrace", {"threadId": thread_id})
            assert frames["stackFrames"][0]["name"] == "work"
            await child.request("continue", {"threadId": thread_id})
            # The breakpoint set on the parent only: the child never sent setBreakpoints.
            stop = await child.wait_event("stopped", reason="breakpoint")
            frames = await child.request("stackTrace", {"threadId": stop.body["threadId"]})
            assert frames["stackFrames"][0]["line"] == later_line
        # Ending the parent, even with terminate, kills nothing.
        assert ide.parent is not None
        await ide.parent.request("terminate")
        await ide.parent.request("disconnect", {"terminateDebuggee": True})
        await ide.parent.close()
        for child, _configuration, _thread_id in ide.children:
            with pytest.raises(DapRequestError, match="does not terminate"):
                await child.request("terminate")
            await child.request("disconnect", {"terminateDebuggee": True})  # detaches only
            await child.close()

    run(scenario(), timeout=120)
    for tag, proc in procs.items():
        code, out, _ = finish(proc)
        assert code == 0 and f"{tag} done {len(tag) + 3}" in out


def test_a_client_without_child_sessions_gets_the_oldest_waiting(hub: HubProcess,
                                                                 tmp_path: Path):
    script = write_script(tmp_path, "worker.py", WORKER)
    first = hub.spawn(script, "first")
    hub.wait_sessions(1)
    second = hub.spawn(script, "second")
    hub.wait_sessions(2)

    async def scenario() -> None:
        client = await hub.dap()  # its initialize does not offer startDebugging
        await client.attach()
        [attached] = [s for s in hub.get("/api/sessions") if s["state"] == "attached"]
        assert attached["pid"] == first.pid
        await client.request("disconnect", {})
        await client.close()
        other = await hub.dap()
        await other.attach()
        await other.request("disconnect", {})
        await other.close()

    run(scenario())
    assert finish(first)[0] == 0 and finish(second)[0] == 0

