"""Breakpoints set in the IDE reach every process: no ``breakpoint()`` in the code.

An IDE-like client attaches to the hub's cluster session *before* the processes start
(``RAYDEBUG_LIVE=1``: linked from their start, ranks 0-2) and sets, on the processes' file, a
conditional breakpoint (``RANK == "1" and i == 5``) and a logpoint. Shown: the logpoint's
texts reach the parent's debug console prefixed with rank and pid, with no pause (those of
the stopped process, once its child session debugs it, that child's console too); exactly the
matching process stops, as a child session at that line, whose locals are read; the
breakpoints become verified once a process has the file loaded; the job completes.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
from pathlib import Path

import pytest

from devtools.ide import IdeLikeClient
from helpers import HubProcess, finish, line_of, run, write_script

pytestmark = pytest.mark.integration

JOB = """
def work(rank):
    total = 0
    for i in range(20):
        total += i  # logpoint line
        total += 1  # breakpoint line
    return total

import os
input()  # the test says when every process is linked (this job is over in microseconds)
print("done", work(os.environ["RANK"]), flush=True)
input()  # the test says when it has every logpoint's text
"""


def test_ide_breakpoints_reach_processes_started_later(hub: HubProcess, tmp_path: Path):
    script = write_script(tmp_path, "job.py", JOB)
    stop_line, log_line = line_of(script, "breakpoint line"), line_of(script, "logpoint line")

    async def scenario() -> None:
        ide = IdeLikeClient(hub)
        attach = await ide.open_cluster()
        parent = ide.parent
        assert parent is not None
        answer = await parent.request("setBreakpoints", {"source": {"path": str(script)},
                                                          "breakpoints": [
            {"line": stop_line, "condition": 'RANK == "1" and i == 5'},
            {"line": log_line, "logMessage": "i={i}"}]})
        assert [b["verified"] for b in answer["breakpoints"]] == [False, False]
        await parent.request("configurationDone")
        assert (await attach).success

        procs = [subprocess.Popen([sys.executable, str(script)],
                                  env=hub.env(RAYDEBUG_LIVE="1", RANK=str(rank)),
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, text=True) for rank in range(3)]
        hub.workers.extend(procs)  # stopped by pid at teardown
        await asyncio.to_thread(hub.wait_linked, 3)
        for proc in procs:
            assert proc.stdin is not None
            proc.stdin.write("\n")
            proc.stdin.flush()
        verified = await parent.wait_event("breakpoint", timeout=30)
        assert verified.body["breakpoint"]["verified"] is True
        try:
            child, _configuration, thread_id = await ide.next_child(60)
        except TimeoutError:
            sessions = hub.get("/api/sessions")
            for proc in procs:
                proc.kill()
            raise AssertionError((sessions, [p.communicate()[1][-1500:] for p in procs])) \
                from None
        [session] = hub.get("/api/sessions")
        assert (session["pid"], session["line"], session["reason"]) == (
            procs[1].pid, stop_line, "breakpoint")
        frames = await child.request("stackTrace", {"threadId": thread_id})
        top = frames["stackFrames"][0]
        assert (top["source"]["path"], top["line"]) == (str(script), stop_line)
        value = await child.request("evaluate", {"expression": "(rank, i)",
                                                 "frameId": top["id"], "context": "repl"})
        assert value["result"] == "('1', 5)"
        await child.request("continue", {"threadId": thread_id})

        # Every rank logs on the parent, rank 1 also while its child session debugs it
        # (the arm leaves the pausing to pydevd, never the logging); there, its child's
        # pydevd has the same breakpoints and logs them in the child's console too.
        texts = [(await parent.wait_event("output", timeout=30)).body["output"]
                 for _ in range(3 * 20)]
        for rank, proc in enumerate(procs):
            mine = [t for t in texts if f"rank {rank}, pid {proc.pid}]" in t]
            assert [t.rsplit("] ", 1)[1] for t in mine] == [f"i={i}\n" for i in range(20)]
        in_child = [(await child.wait_event("output", timeout=30)).body["output"]
                    for _ in range(14)]  # pydevd's logpoint output (category stdout)
        assert in_child == [f"i={i}\n" for i in range(6, 20)]
        for proc in procs:
            assert proc.stdin is not None
            proc.stdin.write("\n")
            proc.stdin.flush()
        for proc in procs:
            code, out, err = await asyncio.to_thread(finish, proc)
            assert code == 0 and "done 210" in out, err
        await child.request("disconnect", {})
        await child.close()
        await parent.request("disconnect", {})
        await parent.close()

    run(scenario(), timeout=150)
