"""Cluster breakpoints on Python 3.10/3.11 served by rewritten code (agent/armed/code.py), on
the real interpreters: no trace function anywhere while armed, hits in modules imported before and
after arming, conditions, hit counts, logpoints, the originals back on clearing, and the
trace fallbacks (a frame of the file already running, a source that changed since import)
still stopping at every hit.

Each scenario arms the set in-process (as the hub's ``ArmBreakpoints`` would) with a recorder
for ``on_hit`` and prints one JSON line of what it saw. A stop in rewritten code through a
real hub steps in and continues in pydevd (``next`` after such a stop: test_armed_breakpoints.py,
also on 3.10/3.11).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from devtools.pythons import PYTHONS, SOURCE, interpreter, python_for
from helpers import TIMEOUT, HubProcess, line_of, next_line, run, venv_with_debugpy, write_script

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]

TARGET = """
def work(n):
    total = 0
    for i in range(n):
        total += i  # logpoint line
        doubled = i * 2  # breakpoint line
    return total

def make_adder(k):
    def add(x):
        return x + k  # inner line
    return add
"""

LATER = """
def later(a):
    b = a + 1  # later line
    return b
"""

SCENARIO = """
import json, sys, threading
sys.path.insert(0, sys.argv[2])
from raydebug.agent.armed.breakpoints import ArmedBreakpoints, BreakpointSet
import target

lines = json.loads(sys.argv[1])
hits, logs, out = [], [], {}
arm = ArmedBreakpoints(on_hit=lambda f: hits.append([f.f_code.co_name, f.f_lineno,
                                                     f.f_locals.get("i")]),
                       on_log=lambda text, f: logs.append(text))

def bp_set(extra=()):
    return BreakpointSet.from_wire({"sources": [
        {"path": target.__file__, "breakpoints": [
            {"line": lines["breakpoint"], "condition": "i % 2 == 1"},
            {"line": lines["logpoint"], "logMessage": "i={i}"},
            {"line": lines["inner"], "hitCondition": "2"}]},
        {"path": sys.argv[2] + "/later.py", "breakpoints": [{"line": lines["later"]}]},
        *extra]})

traces = {}
started, go = threading.Event(), threading.Event()
def bystander():  # a thread that exists before arming
    started.set(); go.wait(10); traces["thread"] = repr(sys.gettrace())
thread = threading.Thread(target=bystander); thread.start(); started.wait(10)

original, adder = target.work.__code__, target.make_adder(1)
arm.arm(bp_set())
go.set(); thread.join(10)
traces.update(main=repr(sys.gettrace()), threading=repr(threading.gettrace()))
out["traces"] = traces
target.work(4)
adder(1); target.make_adder(2)(5)  # made before and after arming: the second hit counts
import later
later.later(1)
out.update(modes=arm.modes(), hits=list(hits), logs=logs)
arm.disarm()
out["restored"] = target.work.__code__ is original and "__raydebug_line__" not in str(
    adder.__code__.co_names)
out["after"] = [repr(sys.gettrace()), arm.modes()]
hits.clear(); target.work(4); out["hits_after"] = hits
print(json.dumps(out), flush=True)
"""

RUNNING = """
import json, sys, threading, time
sys.path.insert(0, sys.argv[2])
from raydebug.agent.armed.breakpoints import ArmedBreakpoints, BreakpointSet
import target, spin

lines = json.loads(sys.argv[1])
hits, out = [], {}
arm = ArmedBreakpoints(on_hit=lambda f: hits.append([f.f_code.co_name, f.f_lineno]),
                       on_log=lambda text, f: None)
inside, go, thread_trace = threading.Event(), threading.Event(), []
def run_spin():
    spin.spin(inside, go)
    thread_trace.append(repr(sys.gettrace()))  # the spinning frame returned: nothing left
thread = threading.Thread(target=run_spin); thread.start(); inside.wait(10)
# spin() is running the original code: it is traced on its thread until it returns.
arm.arm(BreakpointSet.from_wire({"sources": [
    {"path": spin.__file__, "breakpoints": [{"line": lines["spin"]}]}]}))
out["main_trace"] = repr(sys.gettrace())
go.set(); thread.join(10)
out["thread_trace"] = thread_trace
out["modes_running"] = arm.modes()
spin.spin(None, None)  # rewritten now
# The source of target.py changed on disk after its import: traced instead, still stopping.
with open(target.__file__) as f: text = f.read()
with open(target.__file__, "w") as f: f.write("\\n" + text)
arm.arm(BreakpointSet.from_wire({"sources": [
    {"path": spin.__file__, "breakpoints": [{"line": lines["spin"]}]},
    {"path": target.__file__, "breakpoints": [{"line": lines["breakpoint"]}]}]}))
out["modes_changed"] = arm.modes()
out["traced"] = sys.gettrace() is not None
target.work(2)
out["hits"] = list(hits)
# A loop's head cannot be served by a call: the file is traced once loaded (spin is).
hits.clear()
arm.arm(BreakpointSet.from_wire({"sources": [
    {"path": spin.__file__, "breakpoints": [{"line": lines["loop"]}]},
    {"path": sys.argv[2] + "/unloaded.py", "breakpoints": [{"line": 2}]}]}))
out["modes_loop"] = arm.modes()
spin.spin(None, None)
out["loop_hits"] = len(hits)
arm.disarm()
out["cleared"] = repr(sys.gettrace())
print(json.dumps(out), flush=True)
"""

SPIN = """
def spin(inside, go):
    for round in range(3):
        if inside is not None and round == 0:
            inside.set(); go.wait(10)
        x = round  # spin line
    return x
"""

VERSIONS = ["3.10", "3.11"]


def python_of(version: str, with_debugpy: bool = False) -> str:
    """The interpreter; ``with_debugpy``, in a venv with debugpy (whose helper library sets
    another thread's trace function)."""
    if version == "3.11":
        return sys.executable
    found = interpreter(version) if version in PYTHONS else None
    if found is None:
        pytest.skip(f"Python {version} is not installed")
    return venv_with_debugpy(found) if with_debugpy else str(found)


def run_scenario(python: str, script: str, code_dir: Path, lines: dict[str, int]
                 ) -> dict[str, object]:
    done = subprocess.run([python, "-c", script, json.dumps(lines), str(code_dir)],
                          capture_output=True, text=True, timeout=TIMEOUT,
                          env={"PYTHONPATH": str(SOURCE), "PATH": "/usr/bin:/bin"})
    assert done.returncode == 0, done.stderr[-3000:]
    result: dict[str, object] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


@pytest.mark.parametrize("version", VERSIONS)
def test_rewritten_code_stops_logs_counts_and_leaves_no_trace_function(
        tmp_path: Path, version: str) -> None:
    target = write_script(tmp_path, "target.py", TARGET)
    later = write_script(tmp_path, "later.py", LATER)
    lines = {"breakpoint": line_of(target, "breakpoint line"),
             "logpoint": line_of(target, "logpoint line"),
             "inner": line_of(target, "inner line"), "later": line_of(later, "later line")}
    out = run_scenario(python_of(version), SCENARIO, tmp_path, lines)
    assert out["traces"] == {"thread": "None", "main": "None", "threading": "None"}, out
    assert out["modes"] == {str(target): "rewrite", str(later): "rewrite"}, out
    assert out["hits"] == [["work", lines["breakpoint"], 1], ["work", lines["breakpoint"], 3],
                           ["add", lines["inner"], None], ["later", lines["later"], None]]
    assert out["logs"] == ["i=0", "i=1", "i=2", "i=3"]
    assert out["restored"] is True
    assert out["after"] == ["None", {}]
    assert out["hits_after"] == []


@pytest.mark.parametrize("version", VERSIONS)
def test_running_frames_and_changed_sources_are_traced_and_still_stop(
        tmp_path: Path, version: str) -> None:
    target = write_script(tmp_path, "target.py", TARGET)
    spin = write_script(tmp_path, "spin.py", SPIN)
    write_script(tmp_path, "unloaded.py", "def f():\n    for i in range(3):\n        pass\n")
    lines = {"breakpoint": line_of(target, "breakpoint line"), "spin": line_of(spin, "spin line"),
             "loop": line_of(spin, "for round")}
    out = run_scenario(python_of(version, with_debugpy=True), RUNNING, tmp_path, lines)
    assert out["main_trace"] == "None", out  # only the spinning thread was traced
    assert out["thread_trace"] == ["None"], out
    assert out["modes_running"] == {str(spin): "rewrite"}, out
    assert out["modes_changed"] == {
        str(spin): "rewrite", str(target): "trace: its source changed since it was loaded"}

    assert out["traced"] is True
    spin_hits = [["spin", lines["spin"]]] * 3  # the running frame's 3 rounds, traced
    assert out["hits"] == spin_hits + [["spin", lines["spin"]]] * 3 + [
        ["work", lines["breakpoint"]]] * 2, out
    assert out["modes_loop"] == {
        str(spin): f"trace: line {lines['loop']} is a loop's head",
        str(tmp_path / "unloaded.py"): "trace once loaded: line 2 is a loop's head"}, out
    assert out["loop_hits"] >= 3  # each round (a trace function's count)
    assert out["cleared"] == "None"


STEPPED = """
def helper(x):
    y = x + 1  # helper line
    return y

def work(n):
    total = 0
    for i in range(n):
        total += helper(i)  # breakpoint line
    return total
"""

STEPPING_WORKER = """
import json, sys
sys.path.insert(0, sys.argv[2])
from raydebug.agent import get_agent
import stepped

agent = get_agent()
agent.link.start()
agent.link.attempted.wait(30)  # armed with the hub's set (none) before it registers: then ours
agent.arm_breakpoints(json.loads(sys.argv[1]))
print("modes", *sorted(set(agent.breakpoints.modes().values())), repr(sys.gettrace()),
      flush=True)
print("done", stepped.work(3), flush=True)
"""


@pytest.mark.parametrize("version", VERSIONS)
def test_a_stop_in_rewritten_code_steps_in_and_continues_in_pydevd(
        hub: HubProcess, tmp_path: Path, version: str) -> None:
    code_dir = tmp_path / "code"
    code_dir.mkdir()
    stepped = write_script(code_dir, "stepped.py", STEPPED)
    script = write_script(tmp_path, "worker.py", STEPPING_WORKER)
    stop_line, helper_line = line_of(stepped, "breakpoint line"), line_of(stepped, "helper line")
    breakpoints = {"sources": [{"path": str(stepped), "breakpoints": [
        {"line": stop_line, "condition": "i == 1"}]}]}
    proc = subprocess.Popen([python_for(version), str(script),
                             json.dumps(breakpoints), str(code_dir)],
                            env=hub.env(PYTHONPATH=str(SOURCE)), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, bufsize=0)
    hub.workers.append(proc)  # type: ignore[arg-type]  # stopped by pid at teardown
    assert next_line(proc).split() == ["modes", "rewrite", "None"]

    async def step_in_and_continue() -> None:
        [session] = hub.wait_sessions(1, timeout=60, state="waiting")
        client = await hub.dap()
        stopped = await client.attach(session["id"], timeout=60)
        thread = stopped.body["threadId"]
        frames = await client.request("stackTrace", {"threadId": thread})
        assert [(f["name"], f["line"]) for f in frames["stackFrames"][:1]] == [
            ("work", stop_line)]  # the hook's own frame is not shown
        # Into helper from the stop; then back at the line in the next round (a stop of
        # pydevd's, before the call of the hook), into helper again: never into the hook.
        for x in ("1", "2"):
            seen = []
            for _ in range(8):  # next, next, ... until the breakpoint's line again
                frames = await client.request("stackTrace", {"threadId": thread})
                seen.append((frames["stackFrames"][0]["name"], frames["stackFrames"][0]["line"]))
                if seen[-1] == ("work", stop_line):
                    break
                await client.request("next", {"threadId": thread})
                await client.wait_event("stopped", timeout=30)
            assert seen[-1] == ("work", stop_line), seen
            await client.request("stepIn", {"threadId": thread})
            await client.wait_event("stopped", timeout=30)
            frames = await client.request("stackTrace", {"threadId": thread})
            top = frames["stackFrames"][0]
            assert (top["name"], top["line"]) == ("helper", helper_line), top
            value = await client.request("evaluate", {"expression": "x", "frameId": top["id"],
                                                      "context": "repl"})
            assert value["result"] == x
        await client.request("continue", {"threadId": thread})
        await client.request("disconnect", {})
        await client.close()

    run(step_in_and_continue(), timeout=120)
    out, err = proc.communicate(timeout=60)
    assert out.decode().split() == ["done", "6"], err.decode()[-3000:]
