"""A client's DAP ``pause`` (an IDE's pause button, ``raydebug attach``'s Ctrl-C) pauses as
``raydebug pause`` does: the main thread blocked in C is brought back by raydebug's signal
and stops at its blocked line, another thread blocked in C is served where it waits, and the
client gets one answer to its ``pause``, then ``stopped`` as threads stop.
Real processes, a real hub, the real DapClient."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from helpers import (
    TIMEOUT,
    HubProcess,
    finish,
    line_of,
    locals_of,
    read_line,
    run,
    top_frame,
    write_script,
)
from raydebug.protocol import Response

pytestmark = pytest.mark.integration

BOTH_BLOCKED = """
import os, threading
from raydebug.agent import start_live_link

start_live_link()  # as RAYDEBUG_LIVE=1 does where raydebug's .pth is installed

done = threading.Event()

def worker():
    worker_waits = "for done"
    done.wait()  # the worker waits here
    print("worker: done", flush=True)

def main():
    thread = threading.Thread(target=worker, name="blocked-worker")
    thread.start()
    print("started", os.getpid(), flush=True)
    breakpoint()  # the client attaches here, then continues
    waiting_for = "done"
    done.wait()  # blocked in C: the client's pause
    after = waiting_for + " was set"
    print("main:", after, flush=True)
    thread.join()

main()
"""


def test_a_clients_pause_stops_threads_blocked_in_c(hub: HubProcess, tmp_path: Path):
    script = write_script(tmp_path, "both_blocked.py", BOTH_BLOCKED)
    waits, after = line_of(script, "done.wait()  # blocked in C"), line_of(script, "after = ")
    worker_waits = line_of(script, "done.wait()  # the worker")
    proc = hub.spawn_linked(script)
    assert read_line(proc).split() == ["started", str(proc.pid)]
    (first,) = hub.wait_sessions(1)

    async def scenario() -> None:
        client = await hub.dap()
        answers: list[Response] = []
        dispatch = client._dispatch

        async def counting(message: Any) -> None:  # every answer, the second one too
            if isinstance(message, Response) and message.command == "pause":
                answers.append(message)
            await dispatch(message)

        client._dispatch = counting  # type: ignore[method-assign]
        stopped = await client.attach(first["id"])
        main = stopped.body["threadId"]
        await client.request("continue", {"threadId": main})
        await client.wait_event("continued")
        # Give main a moment to enter its wait: a pause before it would stop it in Python.
        deadline = time.monotonic() + TIMEOUT
        while "waiting_for" not in str(hub.get(f"/api/stacks?pid={proc.pid}&locals=1")):
            assert time.monotonic() < deadline, "main never reached its wait"

        asked = time.monotonic()
        await client.request("pause", {"threadId": main})
        # One stopped for the pause, of the first thread to stop (pydevd's single
        # notification): the main thread, which the signal brings back at once, as a rule.
        stopped = await client.wait_event("stopped")
        took = time.monotonic() - asked
        assert stopped.body["reason"] == "pause", stopped.body
        # The worker, blocked in C too, is served where it waits: a session of its own, its
        # pause pending until its call returns; the main thread's met.
        sessions = {s["thread"]: s for s in hub.wait_sessions(2)}
        blocked = sessions["blocked-worker"]
        assert blocked["blocked_in_c"] is True, blocked
        hub.wait_processes("only the worker's pause pending", lambda ps: [
            p for p in ps if p["pid"] == proc.pid
            and (p.get("pause_requested") or {}).get("threads") == 1])
        top = await top_frame(client, main)
        assert (top["name"], top["line"]) == ("main", waits), top
        assert (await locals_of(client, top["id"]))["waiting_for"] == "'done'"
        threads = (await client.request("threads"))["threads"]
        worker = next(t["id"] for t in threads if t["name"] == "blocked-worker")
        top_worker = await top_frame(client, worker)
        assert (top_worker["name"], top_worker["line"]) == ("worker", worker_waits), top_worker

        await client.request("evaluate", {"expression": "done.set()", "frameId": top["id"],
                                          "context": "repl"})
        await client.wait_event("stopped", threadId=worker)  # back from C, at its next line
        await client.request("next", {"threadId": main})  # the wait returns now
        await client.wait_event("stopped", threadId=main)
        top = await top_frame(client, main)
        assert (top["name"], top["line"]) == ("main", after), top
        await client.request("continue", {"threadId": main})
        await client.request("disconnect", {})
        await client.close()
        assert len(answers) == 1 and answers[0].success, answers
        print(f"client pause -> main thread stopped in {took * 1000:.0f} ms")

    run(scenario(), TIMEOUT * 2)
    code, out, err = finish(proc)
    assert code == 0, err[-2000:]
    assert "main: done was set" in out and "worker: done" in out, out
