"""`raydebug pause task=NAME` stops a Ray task whose (main) thread is blocked in C: one in
`Event.wait()` on an event it made, one in `ray.get` of a task that waits for a flag file
(Ray checks signals while it waits). Each is a session at its blocked line; a client reads
the task's local (and sets the event, or makes the flag), continues, and the job
completes. A real two-node loopback cluster, the real CLI, one cluster for the module."""

from __future__ import annotations

import json
import queue
import threading
from pathlib import Path
from typing import Any

import pytest

from helpers import ask_until, evaluate_and_continue, line_of, run, wait_processes, write_script
from ray_cluster import get, hub_port, raydebug_cli, start_job

pytest.importorskip("ray")
pytestmark = [pytest.mark.integration, pytest.mark.timeout(600)]

JOB = """
import os, sys, threading, time
import ray

ray.init(address=sys.argv[1])

@ray.remote(num_cpus=0.25)
def slow(flag):
    deadline = time.monotonic() + 300
    while not os.path.exists(flag) and time.monotonic() < deadline:
        time.sleep(0.05)  # until the client in gets_in_task makes the flag
    return 8

@ray.remote(num_cpus=0.25)
def waits_on_event():
    marker = 7
    done = threading.Event()
    done.wait()  # blocked on the event
    return marker

@ray.remote(num_cpus=0.25)
def gets_in_task(flag):
    marker = 8
    return ray.get(slow.remote(flag))  # blocked in ray.get

refs = [waits_on_event.remote(), gets_in_task.remote(sys.argv[2])]
print("submitted", flush=True)
print("job done", *ray.get(refs), flush=True)
"""


RAY_NODES = ({"num_cpus": 1}, {"num_cpus": 1})  # the ``cluster`` fixture's two nodes


def at_line(port: int, process_id: str, function: str, line: int) -> bool:
    """Whether a thread of the process ``process_id`` is in ``function`` at ``line`` now
    (its stacks read without pausing it)."""
    for entry in get(port, "/api/stacks?timeout=5")["processes"]:
        if entry["process"]["id"] == process_id:
            return any((frame["function"], frame["line"]) == (function, line)
                       for thread in entry["threads"] for frame in thread["frames"])
    return False


def test_pause_task_stops_ray_tasks_blocked_in_c(cluster: Any, tmp_path: Path):
    job = write_script(tmp_path, "job.py", JOB)
    address = ["--ray-address", cluster.address]
    driver = start_job(job, cluster.address, str(tmp_path / "flag"))
    try:
        assert driver.stdout is not None and driver.stdout.readline() == "submitted\n"

        def running(task: str) -> list[dict[str, Any]]:
            done = raydebug_cli("ps", "--json", f"task={task}", *address)
            return json.loads(done.stdout) if done.returncode == 0 else []

        port = hub_port(cluster.address)
        for task, marker, unblock, blocked in (
                ("waits_on_event", "7", "done.set()", "blocked on the event"),
                ("gets_in_task", "8", "open(flag, 'w').close()", "blocked in ray.get")):
            (process,) = ask_until(f"{task} running", lambda task=task: running(task))
            # Ray says running before the worker reaches the function (it deserializes the
            # arguments first): pause once the stacks show the task where it blocks.
            line = line_of(job, blocked)
            ask_until(f"{task} at its blocked line", lambda process=process, task=task,
                      line=line: at_line(port, process["id"], task, line))
            paused = raydebug_cli("pause", f"task={task}", *address)
            assert paused.returncode == 0, paused.stderr
            assert paused.stdout.startswith(f"paused {process['id']}: session "), paused.stdout
            def sessions(process: dict[str, Any] = process) -> list[Any]:
                listed = json.loads(raydebug_cli("list", "--json", *address).stdout)
                return [s for s in listed if s["process"] == process["id"]]

            (session,) = wait_processes(
                f"127.0.0.1:{port}", f"{task}'s session",
                lambda _, task=task: [s for s in sessions() if s["function"] == task],
                timeout=10)
            assert session["line"] == line
            assert not session.get("blocked_in_c"), session  # stopped for real
            # Ray's own threads (PythonGCThread, in C in its Event.wait: library code only)
            # are no sessions: once no thread is asked any more, the task's is the only one.
            wait_processes(f"127.0.0.1:{port}", f"no pause pending in {task}'s process",
                           lambda processes, process=process: [
                               p for p in processes if p["id"] == process["id"]
                               and not p.get("pause_requested")], timeout=10)
            assert [s["id"] for s in sessions()] == [session["id"]], sessions()
            seen = run(evaluate_and_continue("127.0.0.1", port, session["id"],
                                             f"[marker, {unblock}]", timeout=60),
                       timeout=120)
            assert seen.result.startswith(f"[{marker}, "), seen.result
        out, err = driver.communicate(timeout=120)
        assert driver.returncode == 0, err[-3000:]
        assert "job done 7 8" in out, out
    finally:
        if driver.poll() is None:
            driver.kill()
            driver.wait(timeout=30)


TICKER_JOB = """
import sys, time
import ray

ray.init(address=sys.argv[1])

@ray.remote(num_cpus=0.25)
def ticker():
    for i in range(1200):
        print("tick", i, flush=True)
        time.sleep(0.1)

ref = ticker.remote()
print("submitted", flush=True)
ray.get(ref)  # the driver's main thread, blocked in ray.get
"""


def test_a_paused_driver_prints_its_workers_lines_on(cluster: Any, tmp_path: Path):
    """`raydebug pause` of a Ray driver stops its main thread only: Ray's own threads of the
    driver (its log printer, its error listener) run only Ray's code, and a pause leaves them
    running. The log printer, which polls in Python, was stopped (a session with no frame of
    the user's), and the workers' lines stopped reaching the driver's terminal."""
    job = write_script(tmp_path, "ticker_job.py", TICKER_JOB)
    address = ["--ray-address", cluster.address]
    driver = start_job(job, cluster.address)
    lines: queue.Queue[str] = queue.Queue()
    try:
        assert driver.stdout is not None and driver.stdout.readline() == "submitted\n"
        threading.Thread(target=lambda: [lines.put(line) for line in driver.stdout or ()],
                         daemon=True).start()
        assert "tick" in lines.get(timeout=120)  # the worker's lines reach the driver
        [process] = [p for p in json.loads(raydebug_cli("ps", "--json", *address).stdout)
                     if p["pid"] == driver.pid]  # `raydebug run` became the driver
        paused = raydebug_cli("pause", f"pid={process['pid']}", *address)
        assert paused.returncode == 0, paused.stderr
        listed = json.loads(raydebug_cli("list", "--json", *address).stdout)
        mine = [s for s in listed if s["process"] == process["id"]]
        assert [(s["thread"], s["function"]) for s in mine] == [("MainThread", "<module>")], \
            mine
        while not lines.empty():
            lines.get_nowait()
        assert "tick" in lines.get(timeout=30)  # still printed, its driver paused
    finally:
        driver.kill()
        driver.wait(timeout=30)

