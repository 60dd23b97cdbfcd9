"""What the live link costs a Ray job: task throughput, worker start, idle RSS and CPU.

Three modes in one run on one local Ray (``ray.cluster_utils.Cluster`` on loopback, 2 CPUs):
``plain`` (no raydebug), ``off`` (``raydebug.runtime_env()`` with ``RAYDEBUG_LIVE=0``: the
setup hook only) and ``live`` (the default: every worker linked to the hub from its start).
Throughput runs alternate (plain, off, live, live, off, plain, ...) so that a drift of the
machine favours no mode; each figure is a median. Worker start is an actor's creation to
its first answer (every actor is a new worker process); RSS and CPU are read from /proc of
idle actors' workers, linked and waiting in select().

    .venv/bin/python bench/live_overhead.py [--tasks 2000] [--repeats 3] [--actors 6]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ENV = {"RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0", "PYDEVD_DISABLE_FILE_VALIDATION": "1"}
MODES = ("plain", "off", "live")

DRIVER = """
import json, os, statistics, sys, time
import ray

mode, address, tasks, actors = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
env = {}
if mode != "plain":
    os.environ["RAYDEBUG_LIVE"] = "1" if mode == "live" else "0"
    import raydebug
    env = raydebug.runtime_env()
ray.init(address=address, runtime_env=env, logging_level="ERROR", log_to_driver=False)

@ray.remote(num_cpus=1)  # one worker per CPU, as a real job would
def noop(i):
    return sum(range(1000)) + i

@ray.remote(num_cpus=0)
class Idle:
    def pid(self):
        return os.getpid()

    def link_cpu(self):
        # CPU seconds the link thread used so far (its connect, handshake, Register)
        import threading
        for thread in threading.enumerate():
            if thread.name == "raydebug-link":
                with open(f"/proc/self/task/{thread.native_id}/stat") as handle:
                    stat = handle.read()
                fields = stat.rsplit(")", 1)[1].split()
                return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
        return None

result = {}
if tasks:
    ray.get([noop.remote(i) for i in range(tasks // 4)])  # warm the worker pool up
    start = time.perf_counter()
    ray.get([noop.remote(i) for i in range(tasks)])
    result["seconds"] = time.perf_counter() - start
if actors:
    starts, handles = [], []
    for _ in range(actors):  # one at a time: each start measured alone
        start = time.perf_counter()
        handle = Idle.remote()
        pid = ray.get(handle.pid.remote())
        starts.append(time.perf_counter() - start)
        handles.append((handle, pid))
    result["start_seconds"] = starts
    result["pids"] = [pid for _, pid in handles]
    time.sleep(2.0)  # the links connect
    result["link_cpu"] = ray.get([handle.link_cpu.remote() for handle, _ in handles])
    print("RESULT", json.dumps(result), flush=True)
    sys.stdin.readline()  # the bench reads RSS and CPU of the idle workers meanwhile
else:
    print("RESULT", json.dumps(result), flush=True)
"""


def rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS"):
            return int(line.split()[1])
    return 0


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def drive(script: Path, mode: str, cluster: Any, tasks: int,
          actors: int) -> tuple[subprocess.Popen[str], dict[str, Any]]:
    proc = subprocess.Popen([sys.executable, str(script), mode, cluster.address, str(tasks),
                             str(actors)], env={**os.environ, **ENV}, stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    for line in proc.stdout:
        if line.startswith("RESULT"):
            return proc, json.loads(line.split(" ", 1)[1])
    proc.wait(timeout=60)
    raise RuntimeError(f"the {mode} driver failed: {proc.stderr.read() if proc.stderr else ''}")


def finish(proc: subprocess.Popen[str]) -> None:
    try:
        proc.communicate("\n", timeout=120)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=30)


def run(tasks: int, repeats: int, actors: int, idle_seconds: float) -> dict[str, Any]:
    os.environ.update(ENV)
    from ray.cluster_utils import Cluster

    cluster = Cluster(initialize_head=True, head_node_args={
        "num_cpus": 2, "node_ip_address": "127.0.0.1", "include_dashboard": False})
    try:
        script = Path(tempfile.mkdtemp(prefix="live-bench")) / "live_driver.py"
        script.write_text(DRIVER)
        seconds: dict[str, list[float]] = {mode: [] for mode in MODES}
        for repeat in range(repeats * 2):
            for mode in (MODES if repeat % 2 == 0 else tuple(reversed(MODES))):
                proc, result = drive(script, mode, cluster, tasks, 0)
                finish(proc)
                seconds[mode].append(result["seconds"])
        median = {mode: statistics.median(values) for mode, values in seconds.items()}
        results: dict[str, Any] = {
            "tasks": tasks, "seconds": seconds,
            "throughput_live_vs_plain": median["plain"] / median["live"],
            "throughput_live_vs_off": median["off"] / median["live"]}
        for mode in MODES:
            proc, result = drive(script, mode, cluster, 0, actors)
            try:
                time.sleep(2.0)  # the links connect, then the workers sit idle
                pids = result["pids"]
                before = {pid: cpu_seconds(pid) for pid in pids}
                time.sleep(idle_seconds)
                cpu = [cpu_seconds(pid) - before[pid] for pid in pids]
                link_cpu = [c for c in result["link_cpu"] if c is not None]
                results[mode] = {
                    "link_thread_cpu_ms": statistics.median(link_cpu) * 1000 if link_cpu
                    else None,
                    "worker_start_ms": statistics.median(result["start_seconds"]) * 1000,
                    "worker_start_ms_all": [round(s * 1000, 1) for s in result["start_seconds"]],
                    "idle_rss_mib": statistics.median(rss_kib(pid) for pid in pids) / 1024,
                    f"idle_cpu_s_per_{idle_seconds:g}s": max(cpu)}
            finally:
                finish(proc)
        results["worker_start_extra_ms"] = (results["live"]["worker_start_ms"]
                                            - results["plain"]["worker_start_ms"])
        results["link_start_ms"] = link_start_ms()
        results["idle_rss_extra_mib_vs_plain"] = (results["live"]["idle_rss_mib"]
                                                  - results["plain"]["idle_rss_mib"])
        results["idle_rss_extra_mib_vs_off"] = (results["live"]["idle_rss_mib"]
                                                - results["off"]["idle_rss_mib"])
        return results
    finally:
        cluster.shutdown()


LINK_START = """
import os, sys, time
from raydebug.agent import start_live_link  # a Ray worker's setup hook imported it already
start = time.perf_counter()
start_live_link()
print("MS", (time.perf_counter() - start) * 1000, flush=True)
"""


def link_start_ms(count: int = 5) -> float:
    """What ``start_live_link`` takes on the starting thread (the agent's imports, the
    agent and the connect are the link thread's), in a plain process pointed at an
    unreachable hub."""
    env = {**os.environ, "RAYDEBUG_HUB": "127.0.0.1:9", "RAYDEBUG_TOKEN": "x"}
    times = []
    for _ in range(count):
        out = subprocess.run([sys.executable, "-c", LINK_START], capture_output=True,
                             text=True, env=env, timeout=60, check=True).stdout
        times.append(float(out.split()[-1]))
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=2000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--actors", type=int, default=6)
    parser.add_argument("--idle-seconds", type=float, default=60.0)
    args = parser.parse_args()
    print(json.dumps(run(args.tasks, args.repeats, args.actors, args.idle_seconds), indent=2))


if __name__ == "__main__":
    main()
