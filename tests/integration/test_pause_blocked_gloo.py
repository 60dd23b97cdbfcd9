"""`raydebug pause` of a rank blocked in a gloo collective: two real processes form a gloo
group on loopback (``torch.distributed``, CPU); rank 1 waits in ``dist.all_reduce`` on its
main thread because rank 0 has not joined. raydebug's signal does not bring that call back
to Python (gloo waits again on a condition variable), so the rank is served where it
blocks: a session ``blocked in C`` at the user's line, its locals read; ``continue`` lets it
wait on, and once rank 0 joins both complete. Real processes, a real hub, real gloo."""

from __future__ import annotations

import importlib.util
import socket
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
    raydebug,
    read_line,
    run,
    top_frame,
    write_script,
)
from raydebug.client.hub_api import stacks

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(importlib.util.find_spec("torch") is None,
                       reason="needs torch (.ci/run installs its CPU build where this "
                              "machine has the file on disk; pip install torch elsewhere)"),
]

RANK = """
import os
from datetime import timedelta

import torch
import torch.distributed as dist
from raydebug.agent import start_live_link

start_live_link()  # as RAYDEBUG_LIVE=1 does where raydebug's .pth is installed

def main(rank):
    dist.init_process_group("gloo", init_method=os.environ["INIT_METHOD"], rank=rank,
                            world_size=2, timeout=timedelta(seconds=120))
    grads = torch.full((4,), float(rank + 1))
    print("ready", flush=True)
    if rank == 0:
        input()  # joins the collective when the test says so
    dist.all_reduce(grads)  # blocked here
    print("done", grads.tolist(), flush=True)
    dist.destroy_process_group()

input()  # the test says when the process is linked
main(int(os.environ["RANK"]))
"""


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def wait_in_all_reduce(hub: HubProcess, pid: int) -> dict[str, Any]:
    """Wait until ``raydebug stacks`` finds ``pid``'s main thread inside gloo's wait (its
    innermost frame is torch's ``work.wait()``); return that frame."""
    deadline = time.monotonic() + TIMEOUT
    while True:
        (process,) = stacks(hub.client_address, [f"pid={pid}"], timeout=5)["processes"]
        main = next(t for t in process["threads"] if t["name"] == "MainThread")
        innermost: dict[str, Any] = main["frames"][-1]
        if innermost["function"] == "all_reduce" and innermost["code"] == "work.wait()":
            return innermost
        assert time.monotonic() < deadline, f"rank 1 never waited in all_reduce: {main}"


def test_pause_serves_a_rank_blocked_in_a_gloo_all_reduce(hub: HubProcess, tmp_path: Path):
    script = write_script(tmp_path, "rank.py", RANK)
    blocked = line_of(script, "blocked here")
    env = {"INIT_METHOD": f"tcp://127.0.0.1:{free_port()}", "WORLD_SIZE": "2",
           "GLOO_SOCKET_IFNAME": "lo"}  # gloo's pairs on loopback, whatever the host name
    rank0 = hub.spawn_linked(script, RANK="0", **env)
    rank1 = hub.spawn_linked(script, RANK="1", **env)
    assert read_line(rank0, 60) == "ready\n" and read_line(rank1, 60) == "ready\n"
    wait_in_all_reduce(hub, rank1.pid)

    paused = raydebug(hub, "pause", "rank=1")
    assert paused.returncode == 0, paused
    [session] = hub.wait_sessions(1)
    assert session["id"] in paused.stdout, paused.stdout  # listed within --wait (5 s)
    assert session["pid"] == rank1.pid and session["reason"] == "pause", session
    assert session["blocked_in_c"] is True, session  # the signal did not interrupt gloo
    assert (session["file"], session["line"]) == (str(script), blocked), session

    async def scenario() -> None:
        client = await hub.dap()
        stopped = await client.attach(session["id"])
        thread = stopped.body["threadId"]
        top = await top_frame(client, thread)
        assert (top["name"], top["line"]) == ("main", blocked), top
        seen = await locals_of(client, top["id"])
        assert seen["rank"] == "1" and "grads" in seen, seen
        value = await client.request("evaluate", {
            "expression": "grads.tolist()", "frameId": top["id"], "context": "repl"})
        assert value["result"] == "[2.0, 2.0, 2.0, 2.0]", value  # not reduced yet
        await client.request("continue", {"threadId": thread})
        await client.request("disconnect", {})
        await client.close()

    run(scenario(), TIMEOUT)
    hub.wait_sessions(0)  # let go in C: it waits on, no session

    assert rank0.stdin is not None
    rank0.stdin.write("\n")  # rank 0 joins the all_reduce
    rank0.stdin.flush()
    for rank in (rank0, rank1):
        code, out, err = finish(rank, 60)
        assert code == 0, err[-2000:]
        assert out.splitlines()[-1] == "done [3.0, 3.0, 3.0, 3.0]", out
