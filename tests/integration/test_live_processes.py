"""Live processes (RAYDEBUG_LIVE=1): listed from their start, stacks without pausing,
pause on demand, back after a hub restart; forked children and subprocesses linked too."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from helpers import HubProcess, line_of, read_line, run, start_hub, write_script

RANKED = """
import os, signal, sys, threading, time

def spin(n):
    total = 0
    while True:
        total += 1
        time.sleep(0.01)

def say_tracing(*_):  # runs in the main thread, between two of its lines
    print("trace", sys.gettrace(), threading.gettrace(), flush=True)

signal.signal(signal.SIGUSR1, say_tracing)

def wait_for(lock):
    lock.acquire()  # blocked in C, the GIL released, forever

print("started", os.getpid(), flush=True)
if os.environ["RANK"] == "3":
    lock = threading.Lock()
    lock.acquire()
    wait_for(lock)
else:
    spin(0)
"""

CHILDREN = """
import multiprocessing, os, subprocess, sys, time

def child():
    time.sleep(60)

multiprocessing.set_start_method("fork")
forked = multiprocessing.Process(target=child, name="forked")
forked.start()
sub = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
print("children", forked.pid, sub.pid, flush=True)
time.sleep(60)
"""


def wait_processes(hub: HubProcess, predicate: Any, timeout: float = 30.0
                   ) -> list[dict[str, Any]]:
    """The hub's processes (each asked what it runs now) once ``predicate(processes)`` holds
    for a listing that is not empty: a long-poll on the hub's registry, which wakes on the
    change that makes it true. ``TimeoutError`` after ``timeout``."""
    return list(hub.wait_processes(
        "the hub's processes to match", lambda ps: ps if ps and predicate(ps) else None,
        timeout, query="now=1"))


def post(hub: HubProcess, path: str, body: Any) -> tuple[int, Any]:
    request = urllib.request.Request(f"http://{hub.client_address}{path}",
                                     data=json.dumps(body).encode(), method="POST",
                                     headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())


def spawn_ranks(hub: HubProcess, tmp_path: Any) -> list[Any]:
    script = write_script(tmp_path, "ranked.py", RANKED)
    return [hub.spawn(script, RAYDEBUG_LIVE="1", RANK=str(rank), WORLD_SIZE="4")
            for rank in range(4)]


def by_rank(processes: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {p["labels"].get("RANK"): p for p in processes}


async def inspect_and_continue(hub: HubProcess, session_id: str) -> tuple[dict[str, Any], str]:
    """Attach to a paused `spin`, check `total > 0` in its top frame, continue, detach;
    returns the `stopped` event's body and the top frame's name."""
    client = await hub.dap()
    stopped = await client.attach(session_id)
    frames = await client.request("stackTrace", {"threadId": stopped.body["threadId"]})
    value = await client.request("evaluate", {
        "expression": "total > 0", "frameId": frames["stackFrames"][0]["id"],
        "context": "repl"})
    assert value["result"] == "True"
    await client.request("continue", {"threadId": stopped.body["threadId"]})
    await client.request("disconnect", {})
    await client.close()
    return stopped.body, frames["stackFrames"][0]["name"]


def test_ranks_are_listed_stacked_and_paused_on_demand(hub, tmp_path):
    procs = spawn_ranks(hub, tmp_path)
    # Registered: a process is listed from its Identify, its labels come with Register.
    processes = wait_processes(hub, lambda ps: len(ps) == 4 and all(p["live"] for p in ps))
    assert sorted(p["pid"] for p in processes) == sorted(p.pid for p in procs)
    assert all(p["state"] == "running" and p["sessions"] == [] for p in processes)
    assert sorted(by_rank(processes)) == ["0", "1", "2", "3"]
    assert all(p["labels"]["WORLD_SIZE"] == "4" for p in processes)

    stacks = hub.get("/api/stacks?timeout=5")
    assert len(stacks["processes"]) == 4
    innermost = {}
    for entry in stacks["processes"]:
        assert entry["answered"] is True, entry
        (thread,) = entry["threads"]  # the link thread is not listed
        assert thread["name"] == "MainThread"
        functions = [frame["function"] for frame in thread["frames"]]
        assert functions[0] == "<module>"  # outermost first
        innermost[entry["process"]["labels"]["RANK"]] = thread["frames"][-1]
    assert {innermost[r]["function"] for r in "012"} == {"spin"}
    assert innermost["3"]["function"] == "wait_for"
    assert innermost["3"]["code"] == "lock.acquire()  # blocked in C, the GIL released, forever"

    one = hub.get("/api/stacks?rank=1&locals=1")
    (entry,) = one["processes"]
    assert entry["process"]["labels"]["RANK"] == "1"
    assert "total" in entry["threads"][0]["frames"][-1]["locals"]

    status, paused = post(hub, "/api/pause", {"selector": ["rank=1"]})
    assert status == 200, paused
    rank1 = by_rank(processes)["1"]
    assert paused == {"paused": [rank1["id"]], "already_paused": [], "failed": {}}
    (session,) = hub.wait_sessions(1)
    assert session["reason"] == "pause" and session["process"] == rank1["id"]
    assert session["function"] == "spin" and session["pid"] == rank1["pid"]
    listed = by_rank(hub.get("/api/processes"))
    assert listed["1"]["state"] == "paused" and listed["1"]["sessions"] == [session["id"]]
    assert listed["0"]["state"] == "running"

    stopped, top = run(inspect_and_continue(hub, session["id"]))
    assert stopped["reason"] == "pause" and top == "spin"
    hub.wait_sessions(0)
    # Untraced again once the client left (tracing follows need).
    assert read_line(procs[1]).split() == ["started", str(procs[1].pid)]
    deadline = time.monotonic() + 10
    while True:
        procs[1].send_signal(signal.SIGUSR1)
        if read_line(procs[1]).strip() == "trace None None":
            break
        assert time.monotonic() < deadline, "the process stayed traced after the pause"
        time.sleep(0.1)
    listed = wait_processes(hub, lambda ps: by_rank(ps)["1"]["state"] == "running")
    assert len(listed) == 4 and procs[1].poll() is None
    # It runs on, unpaused: its counter moves.
    first = hub.get("/api/stacks?rank=1&locals=1")["processes"][0]
    time.sleep(0.2)
    again = hub.get("/api/stacks?rank=1&locals=1")["processes"][0]
    # pydevd's own threads stay invisible after the pause: only the user's thread is shown
    assert [t["name"] for t in again["threads"]] == ["MainThread"], again
    assert first["threads"][0]["frames"][-1]["locals"]["total"] != \
        again["threads"][0]["frames"][-1]["locals"]["total"]

    status, error = post(hub, "/api/pause", {"selector": ["rank=9"]})
    assert status == 400 and error["error"] == "no process matches rank=9"
    assert len(error["known"]) == 4 and all("RANK=" in line for line in error["known"])
    status, error = post(hub, "/api/pause", {"selector": ["rank=x"]})
    assert status == 400 and "rank=x" in error["error"]


def test_a_restarted_hub_gets_every_process_back(tmp_path):
    first = start_hub()
    try:
        procs = spawn_ranks(first, tmp_path)
        before = wait_processes(first, lambda ps: len(ps) == 4)
        port = first.worker[1]
        first.proc.kill()
        first.proc.wait(timeout=10)
        restarted = time.monotonic()
        second = start_hub_on(port, tmp_path / "state")
        try:
            back = wait_processes(second, lambda ps: len(ps) == 4, timeout=15)
            assert sorted(p["pid"] for p in back) == sorted(p.pid for p in procs)
            # the same process keeps its id: a script that kept one still names it
            assert {p["pid"]: p["id"] for p in back} == {p["pid"]: p["id"] for p in before}
            assert time.monotonic() - restarted < 10
        finally:
            second.close()
    finally:
        first.close()


def start_hub_on(agent_port: int, state: Path) -> HubProcess:
    """A hub on a given agent port (the one a killed hub had), retried while it is freed,
    with ``state`` as its state directory."""
    deadline = time.monotonic() + 10
    while True:
        try:
            proc = subprocess.Popen(
                [sys.executable, "-m", "raydebug", "hub", "--port", "0", "--agent-port",
                 str(agent_port), "--token", "test-token"],
                env={**os.environ, "XDG_STATE_HOME": str(state)},
                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            words = read_line(proc, timeout=10).split()
            host, port = words[4].rsplit(":", 1)
            return HubProcess(proc, (host, int(port)), ("127.0.0.1", agent_port),
                              "test-token", state=state)
        except (IndexError, TimeoutError):
            proc.kill()
            proc.wait()
            if time.monotonic() > deadline:
                raise


def test_forked_children_and_subprocesses_link_as_their_own(hub, tmp_path):
    proc = hub.spawn(write_script(tmp_path, "children.py", CHILDREN), RAYDEBUG_LIVE="1")
    line = proc.stdout.readline().split()
    forked, sub = int(line[1]), int(line[2])
    # Registered, all three: a process is listed from its Identify, and names its parent once
    # both have sent their Register (the two links connect in either order).
    processes = wait_processes(hub, lambda ps: len(ps) == 3 and all(p["live"] for p in ps))
    pids = {p["pid"]: p for p in processes}
    assert set(pids) == {proc.pid, forked, sub}
    parent = pids[proc.pid]
    assert pids[forked]["parent"] == parent["id"] and pids[sub]["parent"] == parent["id"]
    assert parent["parent"] is None
    (entry,) = hub.get(f"/api/stacks?pid={forked}")["processes"]
    assert entry["answered"]
    assert [frame["function"] for frame in entry["threads"][0]["frames"]][-1] == "child"


def test_an_idle_linked_process_imports_no_debugpy_and_is_not_traced(hub, tmp_path):
    script = write_script(tmp_path, "idle.py", """
        import sys, threading, time
        print("ready", flush=True)
        sys.stdin.readline()
        traced = [t for t in threading.enumerate() if getattr(t, "pydev_do_not_trace", 0)]
        monitoring = getattr(sys, "monitoring", None)
        tools = [i for i in range(6) if monitoring and monitoring.get_tool(i)]
        print("debugpy" in sys.modules, "pydevd" in sys.modules, sys.gettrace(),
              threading.gettrace() if hasattr(threading, "gettrace") else None, tools,
              [t.name for t in traced], flush=True)
        """)
    proc = subprocess.Popen([sys.executable, str(script)], env=hub.env(RAYDEBUG_LIVE="1"),
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    hub.workers.append(proc)
    assert proc.stdout.readline().strip() == "ready"
    wait_processes(hub, lambda ps: len(ps) == 1)
    hub.get("/api/stacks")  # answered on the link thread: still nothing imported
    cpu_before = _cpu_seconds(proc.pid)
    time.sleep(2.0)  # what an idle process costs over two seconds
    cpu = _cpu_seconds(proc.pid) - cpu_before
    assert proc.stdin is not None
    proc.stdin.write("\n")
    proc.stdin.flush()
    report = proc.stdout.readline().strip()
    assert report == "False False None None [] ['raydebug-link']", report
    assert cpu < 0.02, f"an idle linked process used {cpu:.3f} s of CPU in 2 s"


def _cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


@pytest.mark.parametrize("live", ["0", ""])
def test_without_raydebug_live_nothing_links(hub, tmp_path, live):
    proc = hub.spawn(write_script(tmp_path, "plain.py", """
        import time
        print("up", flush=True)
        time.sleep(30)
        """), RAYDEBUG_LIVE=live)
    assert proc.stdout.readline().strip() == "up"
    time.sleep(0.5)
    assert hub.get("/api/processes") == []


def test_a_process_started_before_its_hub_says_so_once_and_links_when_it_comes(tmp_path):
    with socket.socket() as probe:  # a free port, for the hub that is not there yet
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    script = write_script(tmp_path, "early.py", """
        import sys, time
        print("up", flush=True)
        sys.stdin.readline()
        """)
    env = {**os.environ, "RAYDEBUG_LIVE": "1", "RAYDEBUG_HUB": f"127.0.0.1:{port}",
           "RAYDEBUG_TOKEN": "test-token"}
    proc = subprocess.Popen([sys.executable, str(script)], env=env, stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    hub = None
    try:
        assert read_line(proc).strip() == "up"
        time.sleep(1.5)  # a few retries with the hub down
        hub = start_hub_on(port, tmp_path / "state")
        (listed,) = wait_processes(hub, lambda ps: len(ps) == 1, timeout=15)
        assert listed["pid"] == proc.pid
        _, err = proc.communicate("\n", timeout=30)
        assert proc.returncode == 0, err
        assert err.count("cannot reach the hub") == 1, err  # one line, not one per retry
        assert "Traceback" not in err
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=10)
        if hub is not None:
            hub.close()


def test_the_live_endpoints_follow_the_client_token_and_origin_rules():
    hub = start_hub("--client-token", "s3cret")
    try:
        def ask(method: str, path: str, body: Any = None, **headers: str) -> int:
            request = urllib.request.Request(
                f"http://{hub.client_address}{path}", method=method, headers=headers,
                data=None if body is None else json.dumps(body).encode())
            try:
                with urllib.request.urlopen(request, timeout=30) as response:
                    return int(response.status)
            except urllib.error.HTTPError as error:
                return int(error.code)

        bearer = {"Authorization": "Bearer s3cret"}
        pause = {"selector": ["rank=1"]}
        for path in ("/api/processes", "/api/stacks"):
            assert ask("GET", path) == 401
            assert ask("GET", path, **bearer) == 200
        assert ask("POST", "/api/pause", pause) == 401
        assert ask("POST", "/api/pause", pause, **bearer) == 400  # nothing to pause
        assert ask("POST", "/api/pause", pause, Origin="http://evil.example", **bearer) == 403
        assert ask("POST", "/api/pause", {"selector": "rank=1"}, **bearer) == 400
        assert ask("GET", "/api/pause", **bearer) == 405  # POST only, and it says so
    finally:
        hub.close()


SPIN_312 = """
import signal, sys, threading, time
from raydebug.agent import start_live_link

def spin():
    total = 0
    while True:
        total += 1
        time.sleep(0.01)

def say_monitoring(*_):
    monitoring = sys.monitoring
    print("tools", [i for i in range(6) if monitoring.get_tool(i)],
          "events", monitoring.get_events(0), flush=True)

signal.signal(signal.SIGUSR1, say_monitoring)
start_live_link()  # what the .pth does (this venv has no raydebug installed)
print("started", flush=True)
spin()
"""


@pytest.mark.parametrize("version", ["3.12"])
def test_pause_under_sys_monitoring(hub, tmp_path, version):
    """Python 3.12+: pydevd pauses through sys.monitoring; its events are off again after."""
    from helpers import venv_with_debugpy

    base = Path("/root/.pyenv/versions").glob(f"{version}.*/bin/python{version}")
    found = sorted(base)
    if not found:
        pytest.skip(f"Python {version} is not installed")
    python = venv_with_debugpy(found[-1])
    script = write_script(tmp_path, "spin312.py", SPIN_312)
    source = str(Path(__file__).resolve().parents[2] / "src")
    proc = subprocess.Popen([python, str(script)], env=hub.env(PYTHONPATH=source),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    hub.workers.append(proc)
    assert read_line(proc).strip() == "started"
    (listed,) = wait_processes(hub, lambda ps: len(ps) == 1)
    status, paused = post(hub, "/api/pause", {"selector": [f"pid={proc.pid}"]})
    assert status == 200 and paused["paused"] == [listed["id"]], paused
    (session,) = hub.wait_sessions(1)
    assert session["function"] == "spin" and session["reason"] == "pause"

    run(inspect_and_continue(hub, session["id"]))
    hub.wait_sessions(0)
    deadline = time.monotonic() + 10
    while True:
        proc.send_signal(signal.SIGUSR1)
        line = read_line(proc).split()
        if line[-1] == "0":  # no sys.monitoring events on any tool's global set
            break
        assert time.monotonic() < deadline, f"still monitored after the pause: {line}"
        time.sleep(0.1)


LOOP_AND_BLOCKED = """
import os, signal, sys, threading, time

gate = threading.Event()

def loop():
    total = 0
    while True:
        total += 1
        time.sleep(0.01)

def blocked():
    gate.wait()  # in C, no timeout: it returns to Python only when the gate opens
    print("released", sys.gettrace(), flush=True)

signal.signal(signal.SIGUSR1, lambda *_: gate.set())  # runs in the looping main thread
signal.signal(signal.SIGUSR2, lambda *_: print("trace", sys.gettrace(), threading.gettrace(),
                                               flush=True))
threading.Thread(target=blocked, name="blocked", daemon=True).start()
print("started", os.getpid(), flush=True)
loop()
"""


def test_a_pause_lists_the_stopped_threads_and_the_blocked_ones(hub, tmp_path):
    """The looping thread is a session where it stopped; a thread blocked in C is one too,
    marked so, where its user's code waits (test_blocked_in_c debugs it); continue lets
    both run on, and the blocked one, let go later, does not stop."""
    script = write_script(tmp_path, "loop_and_blocked.py", LOOP_AND_BLOCKED)
    proc = hub.spawn(script, RAYDEBUG_LIVE="1")
    assert read_line(proc).split() == ["started", str(proc.pid)]
    (listed,) = wait_processes(hub, lambda ps: len(ps) == 1)
    status, paused = post(hub, "/api/pause", {"selector": [f"pid={proc.pid}"]})
    assert status == 200 and paused["paused"] == [listed["id"]], paused

    sessions = {s["thread"]: s for s in hub.wait_sessions(2)}
    stacks = hub.get(f"/api/stacks?pid={proc.pid}&timeout=5")
    session, blocked = sessions["MainThread"], sessions["blocked"]
    first, last = line_of(script, "def loop():"), line_of(script, "time.sleep(0.01)")
    assert session["reason"] == "pause" and not session["blocked_in_c"], session
    assert session["function"] == "loop" and first < session["line"] <= last, session
    assert blocked["reason"] == "pause" and blocked["blocked_in_c"], blocked
    assert blocked["line"] == line_of(script, "gate.wait()"), blocked
    (entry,) = stacks["processes"]
    waiting = {t["name"]: t["frames"][-1]["function"] for t in entry["threads"]}
    assert waiting["blocked"] == "wait", entry["threads"]

    async def attach_and_continue() -> None:
        client = await hub.dap()
        stopped = await client.attach(session["id"])
        assert stopped.body["reason"] == "pause"
        assert hub.get("/api/processes")[0]["pause_requested"]["threads"] == 1  # blocked
        await client.request("continue", {"threadId": stopped.body["threadId"]})
        # Let go while in C, the blocked thread is no longer asked to pause (its request
        # ends with the continue, the client still attached).
        await asyncio.to_thread(wait_processes, hub, lambda ps: not ps[0].get(
            "pause_requested"), 10.0)
        await client.request("disconnect", {})
        await client.close()

    run(attach_and_continue())
    hub.wait_sessions(0)
    listed = wait_processes(hub, lambda ps: ps[0]["state"] == "running")
    assert listed[0]["sessions"] == [] and proc.poll() is None
    first = hub.get(f"/api/stacks?pid={proc.pid}&locals=1")["processes"][0]
    time.sleep(0.2)
    again = hub.get(f"/api/stacks?pid={proc.pid}&locals=1")["processes"][0]
    totals = [next(t for t in s["threads"] if t["name"] == "MainThread")["frames"][-1]
              ["locals"]["total"] for s in (first, again)]
    assert totals[0] != totals[1], totals  # it runs on
    deadline = time.monotonic() + 10
    while True:  # untraced again: the pause asked of the blocked thread is abandoned
        proc.send_signal(signal.SIGUSR2)
        if read_line(proc).strip() == "trace None None":
            break
        assert time.monotonic() < deadline, "the process stayed traced after the pause"
        time.sleep(0.1)
    # The blocked thread, let go, runs on untraced without stopping.
    proc.send_signal(signal.SIGUSR1)
    assert read_line(proc).strip() == "released None"
    assert hub.get("/api/sessions") == []
