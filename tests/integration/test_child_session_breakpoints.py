"""A child session's pydevd has the hub's whole breakpoint set: the breakpoints
``raydebug break`` set (before the child attached, and while it is attached) stop it as the
IDE's own do. The process's arming stands down while a client debugs it, so a breakpoint that
pydevd does not have is not hit at all."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from pathlib import Path

import pytest

from devtools.ide import IdeLikeClient
from helpers import TIMEOUT, HubProcess, finish, line_of, run, write_script

pytestmark = pytest.mark.integration

JOB = """
def work():
    breakpoint()  # pause here
    start = 0  # (breakpoint() stops here, before it runs: a breakpoint here is behind it)
    a = start + 1  # terminal breakpoint
    b = 2  # ide breakpoint
    c = 3  # later terminal breakpoint
    print("done", a + b + c, flush=True)

work()
"""


def raydebug_break(hub: HubProcess, where: str) -> None:
    made = subprocess.run([sys.executable, "-m", "raydebug", "break", "--hub",
                           hub.client_address, where], capture_output=True, text=True,
                          timeout=TIMEOUT)
    assert made.returncode == 0, made.stderr


def test_an_attached_child_stops_at_the_terminals_breakpoints_and_the_ides(
        hub: HubProcess, tmp_path: Path):
    script = write_script(tmp_path, "job.py", JOB)
    terminal, ide_line, later = (line_of(script, marker) for marker in (
        "terminal breakpoint", "ide breakpoint", "later terminal breakpoint"))
    raydebug_break(hub, f"{script}:{terminal}")
    proc = hub.spawn(script)
    hub.wait_sessions(1)

    async def scenario() -> None:
        ide = IdeLikeClient(hub)
        await ide.attach_cluster({str(script): [ide_line]})
        child, _, thread_id = await ide.next_child()
        # Set while the child is attached: its pydevd gets it too.
        await asyncio.to_thread(raydebug_break, hub, f"{script}:{later}")
        for line in (terminal, ide_line, later):
            await child.request("continue", {"threadId": thread_id})
            stop = await child.wait_event("stopped", reason="breakpoint")
            thread_id = stop.body["threadId"]
            frames = await child.request("stackTrace", {"threadId": thread_id})
            assert frames["stackFrames"][0]["line"] == line
        await child.request("continue", {"threadId": thread_id})
        await child.request("disconnect", {})
        await child.close()
        assert ide.parent is not None
        await ide.parent.request("disconnect", {})
        await ide.parent.close()

    try:
        run(scenario(), timeout=120)
    finally:
        subprocess.run([sys.executable, "-m", "raydebug", "break", "--hub",
                        hub.client_address, "--clear"], capture_output=True, timeout=TIMEOUT)
    code, out, err = finish(proc)
    assert code == 0 and "done 6" in out, err
