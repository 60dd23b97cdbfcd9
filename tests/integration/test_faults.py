"""Faults lose nothing: a dropped client, a restarted hub, a killed worker."""

from __future__ import annotations

import signal
import socket
from pathlib import Path

import pytest

from helpers import HubProcess, finish, line_of, run, start_hub, stop, write_script

pytestmark = pytest.mark.integration

WORKER = """
import sys

def compute(tag):
    value = len(tag) * 10
    breakpoint()  # pause here
    value += 1
    print(f"{tag} value={value}", flush=True)

compute(sys.argv[1])
"""


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


async def top_frame(hub: HubProcess, client, thread_id: int) -> dict:
    frames = (await client.request("stackTrace", {"threadId": thread_id}))["stackFrames"]
    return frames[0]


def test_a_dropped_client_leaves_the_worker_paused_where_it_was(hub: HubProcess,
                                                                tmp_path: Path):
    script = write_script(tmp_path, "worker.py", WORKER)
    proc = hub.spawn(script, "abc")
    [session] = hub.wait_sessions(1)

    async def drop_mid_session() -> int:
        client = await hub.dap()
        stopped = await client.attach(session["id"])
        thread_id = stopped.body["threadId"]
        await client.request("next", {"threadId": thread_id})
        await client.wait_event("stopped")
        frame = await top_frame(hub, client, thread_id)
        assert frame["line"] == line_of(script, "pause here") + 2
        # Change a local, then vanish without a disconnect (as a crashed IDE would).
        await client.request("evaluate", {"expression": "value = 99", "frameId": frame["id"],
                                          "context": "repl"})
        client._writer.transport.abort()
        await client.close()
        return int(frame["line"])

    line = run(drop_mid_session())
    [again] = hub.wait_sessions(1, state="waiting")  # listed as waiting again
    assert again["id"] == session["id"]

    async def reattach() -> None:
        client = await hub.dap()
        stopped = await client.attach(session["id"])  # replayed: pydevd sends none itself
        thread_id = stopped.body["threadId"]
        frame = await top_frame(hub, client, thread_id)
        assert frame["line"] == line  # same frame, same line
        result = await client.request("evaluate", {"expression": "value", "frameId": frame["id"],
                                                   "context": "repl"})
        assert result["result"] == "99"  # same locals, including the change
        await client.request("continue", {"threadId": thread_id})
        await client.request("disconnect", {})
        await client.close()

    run(reattach())
    code, out, _ = finish(proc)
    assert code == 0 and "abc value=99" in out


def test_a_restarted_hub_gets_every_paused_worker_back(tmp_path: Path):
    script = write_script(tmp_path, "worker.py", WORKER)
    ports = ("--port", str(free_port()), "--agent-port", str(free_port()))
    hub = start_hub(*ports)
    procs = []
    try:
        procs = [hub.spawn(script, tag) for tag in ("a", "bb", "ccc")]
        hub.wait_sessions(3)
        hub.proc.send_signal(signal.SIGKILL)  # no goodbye to anyone
        hub.proc.wait(timeout=10)
        restarted = start_hub(*ports)
        restarted.workers = procs
        hub = restarted
        sessions = hub.wait_sessions(3, timeout=30)  # the agents reconnect and re-register
        assert {s["pid"] for s in sessions} == {p.pid for p in procs}

        async def debug_all() -> None:
            for session in sessions:
                client = await hub.dap()
                stopped = await client.attach(session["id"])
                frame = await top_frame(hub, client, stopped.body["threadId"])
                assert frame["name"] == "compute"
                await client.request("disconnect", {})
                await client.close()

        run(debug_all())
        outputs = [finish(p) for p in procs]
        assert [o[0] for o in outputs] == [0, 0, 0]
        assert [o[1].strip() for o in outputs] == ["a value=11", "bb value=21", "ccc value=31"]
        assert any("reconnecting" in o[2] for o in outputs)
    finally:
        hub.close()
        for proc in procs:
            stop(proc)


PRINTER = """
import pathlib
import sys
import threading

def chatter():
    while True:
        print("background", flush=True)  # keeps printing while the client leaves
        threading.Event().wait(0.001)

threading.Thread(target=chatter, daemon=True).start()
breakpoint()
for n in range(200):
    print("line", n, flush=True)
pathlib.Path(sys.argv[1]).write_text("ran to the end")
"""


def test_a_process_printing_as_its_client_leaves_exits(hub: HubProcess, tmp_path: Path):
    """With redirectOutput pydevd copies output to the client's writer; after the client
    left, that copy must neither keep the process from exiting nor crash it."""
    script = write_script(tmp_path, "printer.py", PRINTER)
    markers = [tmp_path / f"done-{n}" for n in range(4)]
    workers = [hub.spawn(script, str(marker)) for marker in markers]
    sessions = hub.wait_sessions(len(workers))

    async def attach_and_leave(session_id: str) -> None:
        client = await hub.dap()
        await client.attach(session_id, redirectOutput=True)
        await client.request("disconnect", {})
        await client.close()

    for session in sessions:
        run(attach_and_leave(session["id"]))
    for worker, marker in zip(workers, markers, strict=True):
        code, _, err = finish(worker)
        assert code == 0, err[-2000:]  # neither hung (finish times out) nor crashed
        assert marker.read_text() == "ran to the end"
