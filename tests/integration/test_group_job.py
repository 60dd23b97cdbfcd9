"""A whole job as one DAP session (issue 28's acceptance): a client that refuses child
sessions attaches once with ``group: true`` to paused and running live processes."""

from __future__ import annotations

import asyncio
import json
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest

from helpers import HubProcess, finish, line_of, run, write_script
from raydebug.client.dap import DapClient

pytestmark = pytest.mark.integration

PAUSED = 12
RUNNING = 2
DAP_JS = Path(__file__).with_name("dap_js")  # Microsoft's DebugClient, installed by .ci/run

WORKER = """
import os
import sys

def work(tag):
    rank = int(tag)
    breakpoint()  # pause here
    rank += 100  # stopped here first (a breakpoint() stops on its next line)
    print(f"{tag} done {rank}", flush=True)  # the next line

work(sys.argv[1])
"""

# A live process that runs until a file exists (its pause stops it in spin()).
SPINNER = """
import os
import time

def spin(stop):
    laps = 0
    while not os.path.exists(stop):
        laps += 1
        time.sleep(0.005)
    return laps

input()
print("spun", spin(os.environ["STOP_FILE"]) > 0, flush=True)
"""


def pid_in(name: str) -> int:
    match = re.search(r"pid (\d+)", name)
    assert match, name
    return int(match.group(1))


async def attach_group(hub: HubProcess, **settings: object) -> DapClient:
    client = await DapClient.connect(*hub.client)
    await client.initialize(supportsStartDebuggingRequest=False)
    attach = client.send_request("attach", {"name": "job", "raydebug": {"group": True,
                                                                         **settings}})
    await client.wait_event("initialized")
    assert (await attach).success
    await client.request("configurationDone")
    return client


async def thread_pids(client: DapClient) -> dict[int, int]:
    """The ``threads`` answer: thread id -> the pid its name says."""
    return {thread["id"]: pid_in(thread["name"])
            for thread in (await client.request("threads"))["threads"]}


@dataclass
class Job:
    """``PAUSED`` processes paused in work() (rank label: their index) and ``RUNNING`` live
    ones spinning until ``stop`` exists."""

    script: Path
    paused: dict[int, int]  # pid -> rank
    running: list[subprocess.Popen[str]]
    procs: dict[int, subprocess.Popen[str]]
    stop: Path

    def check_finished(self) -> None:
        """Each paused one ran to its end; the running ones end once told to."""
        self.stop.touch()
        for pid, rank in self.paused.items():
            code, out, _ = finish(self.procs[pid])
            assert code == 0 and f"{rank} done {rank + 100}" in out
        for proc in self.running:
            code, out, _ = finish(proc)
            assert code == 0 and "spun True" in out


def start_job(hub: HubProcess, tmp_path: Path) -> Job:
    script = write_script(tmp_path, "worker.py", WORKER)
    spinner = write_script(tmp_path, "spinner.py", SPINNER)
    stop = tmp_path / "stop"
    paused = {hub.spawn(script, str(rank), RANK=str(rank)).pid: rank for rank in range(PAUSED)}
    running = [hub.spawn_linked(spinner, STOP_FILE=str(stop)) for _ in range(RUNNING)]
    hub.wait_sessions(PAUSED, timeout=120)
    return Job(script, paused, running, {proc.pid: proc for proc in hub.workers}, stop)


def test_one_session_shows_paused_and_running_processes_and_controls_them(
        hub: HubProcess, tmp_path: Path):
    job = start_job(hub, tmp_path)
    script, paused, running, procs = job.script, job.paused, job.running, job.procs

    async def scenario() -> None:
        client = await attach_group(hub)
        stopped = [await client.wait_event("stopped", timeout=60) for _ in range(PAUSED)]
        threads = (await client.request("threads"))["threads"]
        pid_of = {thread["id"]: pid_in(thread["name"]) for thread in threads}
        assert set(pid_of.values()) == set(paused) | {proc.pid for proc in running}
        rank_3 = next(pid for pid, rank in paused.items() if rank == 3)
        assert f"rank 3 · pid {rank_3} · MainThread" in [t["name"] for t in threads]

        frames = {}
        for event in stopped:  # each frame is its own process's
            thread = event.body["threadId"]
            top = (await client.request("stackTrace", {"threadId": thread}))["stackFrames"][0]
            assert top["name"] == "work"
            for expression, expected in (("os.getpid()", pid_of[thread]),
                                         ("rank", paused[pid_of[thread]])):
                answer = await client.request("evaluate", {
                    "expression": expression, "frameId": top["id"], "context": "repl"})
                assert int(answer["result"]) == expected
            frames[thread] = top["id"]

        stepping, other = (event.body["threadId"] for event in stopped[:2])
        step = client.send_request("next", {"threadId": stepping})
        answer = await client.request("evaluate", {  # another process still answers
            "expression": "rank", "frameId": frames[other], "context": "repl"})
        assert int(answer["result"]) == paused[pid_of[other]]
        assert (await step).success
        await client.wait_event("stopped", timeout=30, threadId=stepping)
        top = (await client.request("stackTrace", {"threadId": stepping}))["stackFrames"][0]
        assert top["line"] == line_of(script, "the next line")

        target = running[0].pid
        spinning = next(thread for thread, pid in pid_of.items() if pid == target)
        await client.request("pause", {"threadId": spinning})
        while True:  # its stop joins the session with its debugger's thread ids
            event = await client.wait_event("stopped", timeout=60)
            if (await thread_pids(client)).get(event.body["threadId"]) == target:
                break
        trace = await client.request("stackTrace", {"threadId": event.body["threadId"]})
        assert [f["name"] for f in trace["stackFrames"]][:2] in (["spin", "<module>"],
                                                                  ["sleep", "spin"])

        go = await client.request("continue", {"threadId": stepping})
        assert go["allThreadsContinued"] is True
        for pid in paused:
            assert await asyncio.to_thread(procs[pid].wait, 60) == 0
        assert client.reverse_requests == []  # no startDebugging
        await client.request("disconnect", {})
        await client.close()

    run(scenario(), timeout=180)
    job.check_finished()


@pytest.mark.skipif(shutil.which("node") is None
                    or not (DAP_JS / "node_modules" / "@vscode").is_dir(),
                    reason="needs node and `npm ci` in tests/integration/dap_js "
                           "(`make test` does it where npm is installed)")
def test_microsofts_debug_client_refusing_child_sessions_debugs_the_job(
        hub: HubProcess, tmp_path: Path):
    job = start_job(hub, tmp_path)
    target = job.running[0].pid
    done = subprocess.run(["node", str(DAP_JS / "group_job.js"), str(hub.client[1]),
                           str(PAUSED), str(target)],
                          capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout.strip().splitlines()[-1])
    named = {pid_in(name) for name in report["threadNames"]}
    assert named == set(job.paused) | {proc.pid for proc in job.running}
    assert {int(pid): (seen["pid"], seen["rank"]) for pid, seen in report["evaluated"].items()} \
        == {pid: (pid, rank) for pid, rank in job.paused.items()}
    first = next(iter(report["evaluated"].values()))["line"]
    assert report["stepped"]["line"] == first + 1 == line_of(job.script, "the next line")
    assert report["otherAnswered"] in job.paused.values()
    assert "spin" in report["pausedRunning"][:2]
    assert report["allThreadsContinued"] is True and report["reverse"] == []
    for pid in job.paused:
        assert job.procs[pid].wait(60) == 0
    job.check_finished()


STEPPER = """
import sys

def step(tag):
    value = 1
    breakpoint()  # pause here
    value += 1  # stopped here first
    value += 2  # the next line
    value += 4  # a breakpoint set later
    print(f"{tag} {value}", flush=True)

step(sys.argv[1])
"""


def test_step_together_moves_every_process_stopped_in_the_same_function_and_breakpoints_reach_them(
        hub: HubProcess, tmp_path: Path):
    script = write_script(tmp_path, "stepper.py", STEPPER)
    procs = [hub.spawn(script, tag) for tag in ("a", "b")]
    hub.wait_sessions(2)

    async def scenario() -> None:
        client = await attach_group(hub, stepTogether=True)
        stopped = [await client.wait_event("stopped", timeout=60) for _ in procs]
        first, second = (event.body["threadId"] for event in stopped)
        await client.request("threads")
        await client.request("next", {"threadId": first})
        lines = {}
        for thread in (first, second):
            await client.wait_event("stopped", timeout=30, threadId=thread)
            trace = await client.request("stackTrace", {"threadId": thread})
            lines[thread] = trace["stackFrames"][0]["line"]
        assert set(lines.values()) == {line_of(script, "the next line")}

        later = line_of(script, "a breakpoint set later")  # reaches both joined processes
        answer = await client.request("setBreakpoints", {
            "source": {"path": str(script)}, "breakpoints": [{"line": later}]})
        assert [b["line"] for b in answer["breakpoints"]] == [later]
        await client.request("continue", {"threadId": first})
        for _ in procs:
            hit = await client.wait_event("stopped", timeout=30)
            trace = await client.request("stackTrace", {"threadId": hit.body["threadId"]})
            assert trace["stackFrames"][0]["line"] == later
        await client.request("continue", {"threadId": first})
        for proc in procs:
            assert await asyncio.to_thread(proc.wait, 60) == 0
        assert client.reverse_requests == []
        await client.request("disconnect", {})
        await client.close()

    run(scenario(), timeout=120)
    assert [finish(proc)[1].strip() for proc in procs] == ["a 8", "b 8"]


def test_a_group_that_matches_nothing_says_so_once_and_waits(hub: HubProcess,
                                                            tmp_path: Path):
    script = write_script(tmp_path, "worker.py", WORKER)

    async def scenario() -> None:
        client = await DapClient.connect(*hub.client)
        await client.initialize(supportsStartDebuggingRequest=False)
        attach = client.send_request("attach", {"raydebug": {"group": "rank=5"}})
        await client.wait_event("initialized")
        assert (await attach).success
        await client.request("configurationDone")
        said = await client.wait_event("output", timeout=10)
        assert "no process matches rank=5 yet" in said.body["output"]
        proc = hub.spawn(script, "5", RANK="5")  # it pauses and joins the same session
        stop = await client.wait_event("stopped", timeout=60)
        assert [pid_in(t["name"]) for t in (await client.request("threads"))["threads"]] \
            == [proc.pid]
        await client.request("continue", {"threadId": stop.body["threadId"]})
        exited = await client.wait_event("thread", timeout=60, reason="exited")
        assert exited.body["threadId"] >= 1 and await asyncio.to_thread(proc.wait, 60) == 0
        await asyncio.to_thread(hub.wait_processes, "the process gone", lambda ps: all(
            p["pid"] != proc.pid for p in ps) or None)
        assert (await client.request("threads"))["threads"] == []  # (after any output)
        assert [e.body["output"] for e in client.events("output")
                if "no process" in e.body["output"]] == []  # said once, not again when empty
        await client.request("disconnect", {})
        await client.close()

    run(scenario(), timeout=120)
