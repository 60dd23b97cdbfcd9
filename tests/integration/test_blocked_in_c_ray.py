"""A threaded Ray actor whose method thread is blocked in C (``Event.wait``): `raydebug
pause` of its worker gives that thread a session marked blocked in C; an IDE-like client
reads its locals, evaluates ``gate.set()``, sees it stop at its next line as an ordinary
session, continues, and the job completes."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from helpers import ask_until, run, wait_listing, wait_processes
from ray_cluster import hub_port, process_running, raydebug_cli, session_in, start_job

pytest.importorskip("ray")
pytestmark = [pytest.mark.integration, pytest.mark.timeout(600)]

from raydebug.client.dap import DapClient  # noqa: E402

JOB = """
import sys, threading
import ray

ray.init(address=sys.argv[1])

@ray.remote(num_cpus=0, max_concurrency=2)
class Holder:
    def hold(self):
        gate = threading.Event()  # made in the method: only a debugger can set it
        gate.wait()  # blocked in C on a thread of the actor's pool
        after = "released"
        return after

    def ping(self):
        return "pong"

holder = Holder.remote()
print("ready", ray.get(holder.ping.remote()), flush=True)
print("result", ray.get(holder.hold.remote()), flush=True)
"""

RAY_NODES = ({"num_cpus": 1},)  # the module's cluster (the ``cluster`` fixture)


def test_a_threaded_actors_blocked_method_is_debugged(cluster: Any, tmp_path: Path):
    job = tmp_path / "job.py"
    job.write_text(JOB)
    waits = JOB.splitlines().index("        gate.wait()  # blocked in C on a thread of the "
                                   "actor's pool") + 1
    driver = start_job(job, cluster.address)
    try:
        assert driver.stdout is not None
        assert driver.stdout.readline() == "ready pong\n", driver.stderr
        port = hub_port(cluster.address)

        actor = ask_until("the actor's method waits", lambda: process_running(port, "hold"))
        paused = raydebug_cli("pause", f"pid={actor['pid']}", "--ray-address",
                              cluster.address)
        assert paused.returncode == 0, paused.stderr

        session = wait_processes(f"127.0.0.1:{port}", "the method's session", lambda _: session_in(
            cluster.address, actor["id"], "hold"), timeout=180)
        assert session["blocked_in_c"] is True and session["line"] == waits, session
        assert session["reason"] == "pause" and session["actor_class"] == "Holder"

        async def unblock() -> None:
            client = await DapClient.connect("127.0.0.1", port)
            await client.initialize()
            first = await client.attach(session["id"], timeout=60)
            threads = (await client.request("threads"))["threads"]
            (thread,) = [t["id"] for t in threads if t["name"] == session["thread"]]
            if first.body["threadId"] != thread:
                await client.wait_event("stopped", threadId=thread, timeout=60)
            frames = (await client.request("stackTrace", {"threadId": thread}))[
                "stackFrames"]
            assert (frames[0]["name"], frames[0]["line"]) == ("hold", waits), frames[0]
            scopes = await client.request("scopes", {"frameId": frames[0]["id"]})
            variables = await client.request("variables", {
                "variablesReference": scopes["scopes"][0]["variablesReference"]})
            assert "gate" in {v["name"] for v in variables["variables"]}
            refused = await client.request_response("next", {"threadId": thread})
            assert not refused.success and "blocked in C" in (refused.message or "")
            await client.request("evaluate", {"expression": "gate.set()",
                                              "frameId": frames[0]["id"],
                                              "context": "repl"})
            await client.wait_event("continued", threadId=thread, timeout=60)
            await client.wait_event("stopped", threadId=thread, timeout=60)
            frames = (await client.request("stackTrace", {"threadId": thread}))[
                "stackFrames"]
            assert (frames[0]["name"], frames[0]["line"]) == ("hold", waits + 1)
            # Its record is renewed by the agent's control connection, which the data
            # connection's `stopped` does not wait for: the listing follows, a moment later.
            await asyncio.to_thread(
                wait_listing, f"127.0.0.1:{port}", "/api/sessions",
                "the session listed as no longer blocked in C", lambda sessions: [
                    s for s in sessions
                    if s["id"] == session["id"] and s["blocked_in_c"] is False])
            await client.request("continue", {"threadId": thread})
            await client.request("disconnect", {})
            await client.close()

        run(unblock(), timeout=180)
        out, err = driver.communicate(timeout=180)
        assert "result released" in out, err
    finally:
        if driver.poll() is None:
            driver.kill()
            driver.wait(timeout=30)
