"""What the live link costs a Ray job: task throughput, worker start, idle RSS and CPU.

Three modes in one run on one local Ray (``ray.cluster_utils.Cluster`` on loopback, 2 CPUs):
``plain`` (no raydebug), ``off`` (``raydebug.runtime_env()`` with ``RAYDEBUG_LIVE=0``: the
setup hook only) and ``live`` (the default: every worker linked to the hub from its start).
Throughput is ``ray_bench.interleaved_throughput``: one driver per mode on the cluster at
once, short rounds of no-op tasks in turn (plain, off, live, live, off, plain, ...), the
median of the per-round ratios against plain with a bootstrap 95% interval, for the wall
time and for the CPU of each job's driver and workers. RSS and CPU are read from /proc of
idle actors' workers, linked and waiting in select().

Worker start (an actor's creation to its first answer: every actor is a new worker process)
takes 1-2 s on a loaded 2-core machine, ±0.3 s, so a difference of 10 ms between modes
cannot be seen in a few medians. It is measured twice:

- end to end, *interleaved*: one driver per mode, all three connected to the same cluster
  at once, start one actor each in turn (the order alternating), round after round; the
  figure is the median of the paired differences (live - off, live - plain, within a
  round) with a bootstrap 95% confidence interval; and the same from the setup hook's start
  to the answer at the driver: all that raydebug can change (before its hook it does
  nothing in a worker), without the noise of Ray's exec and imports (~1.2 s, +-0.3 s);
- inside each worker, where the link's cost is: the setup hook's time on the worker's main
  thread (the live part: ``start_live_link``, the ids it reads), the time from the hook's
  end to the actor's ``__init__`` (where a link thread competing for the GIL would show),
  and the link thread's CPU until then (``/proc/self/task/<tid>/schedstat``, ns): an upper
  bound of what it could take from the main thread in that span.

And a plain process's start with ``RAYDEBUG_LIVE=1`` (the startup ``.pth``, a real hub)
against none, interleaved the same way: ``python -c pass`` end to end.

    .venv/bin/python bench/live_overhead.py [--tasks 20] [--pairs 400] [--actors 6]
        [--starts 20] [--only-start]
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

sys.path.insert(0, str(Path(__file__).resolve().parent))
import ray_bench
from ray_bench import median_ci

ENV = {"RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0", "PYDEVD_DISABLE_FILE_VALIDATION": "1"}
MODES = ("plain", "off", "live")
# A worker's start end to end, in turn (the setup hook's own time is hook_ms): the actor's
# creation to the worker's exec (Ray leases, the runtime env, the spawn), exec to the hook
# (the interpreter, Ray's imports, the worker's connect), the hook's end to the answer
# (__init__ and the first call), and the answer's way back to the driver.
PHASES = ("create_to_exec_ms", "exec_to_hook_ms", "hook_to_answer_ms", "answer_to_driver_ms")

DRIVER = """
import json, os, statistics, sys, time
import ray

mode, address, actors = sys.argv[1], sys.argv[2], int(sys.argv[3])
env = {}
if mode != "plain":
    os.environ["RAYDEBUG_LIVE"] = "1" if mode == "live" else "0"
    import raydebug
    env = raydebug.runtime_env()
ray.init(address=address, runtime_env=env, logging_level="ERROR", log_to_driver=False)

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
"""


def rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS"):
            return int(line.split()[1])
    return 0


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def drive(script: Path, mode: str, cluster: Any,
          actors: int) -> tuple[subprocess.Popen[str], dict[str, Any]]:
    proc = subprocess.Popen([sys.executable, str(script), mode, cluster.address,
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


STARTER = """
import json, os, sys, time
import ray

mode, address = sys.argv[1], sys.argv[2]
env = {}
if mode != "plain":
    os.environ["RAYDEBUG_LIVE"] = "1" if mode == "live" else "0"
    import raydebug
    env = raydebug.runtime_env()


def timed_hook(mode=mode):
    # raydebug's own setup hook (none in plain), timed on the worker's main thread, and in
    # it the live link's part: the ids it reads and start_live_link
    import json, os, time
    began = time.time()
    start = time.perf_counter()
    live_part = [0.0]
    if mode != "plain":
        import raydebug.agent
        from raydebug.integrations.ray import setup_worker, worker_hooks

        def timed(function):
            def call(*args, **kwargs):
                began = time.perf_counter()
                try:
                    return function(*args, **kwargs)
                finally:
                    live_part[0] += (time.perf_counter() - began) * 1000
            return call

        raydebug.agent.start_live_link = timed(raydebug.agent.start_live_link)
        worker_hooks.live_identity = timed(worker_hooks.live_identity)
        setup_worker()
    os.environ["BENCH_HOOK"] = json.dumps({"ms": (time.perf_counter() - start) * 1000,
                                           "live_ms": live_part[0], "end": time.time(),
                                           "began": began})


env["worker_process_setup_hook"] = timed_hook
ray.init(address=address, runtime_env=env, logging_level="ERROR", log_to_driver=False)


def link_cpu_ms():
    import threading
    for thread in threading.enumerate():
        if thread.name == "raydebug-link":
            with open(f"/proc/self/task/{thread.native_id}/schedstat") as handle:
                return int(handle.read().split()[0]) / 1e6
    return 0.0


def exec_time():
    # when this process was exec'd (epoch; /proc's clock ticks since boot: 10 ms steps;
    # /proc/stat's btime is whole seconds, so the age is taken on CLOCK_BOOTTIME)
    with open("/proc/self/stat") as handle:
        ticks = int(handle.read().rsplit(")", 1)[1].split()[19])
    age = time.clock_gettime(time.CLOCK_BOOTTIME) - ticks / os.sysconf("SC_CLK_TCK")
    return time.time() - age


def process_cpu_ms():
    # every thread of this worker so far: Ray's, the link thread, the main thread
    total = 0
    for tid in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{tid}/schedstat") as handle:
                total += int(handle.read().split()[0])
        except OSError:
            pass
    return total / 1e6


@ray.remote(num_cpus=0)
class Probe:
    def __init__(self):
        self.ready = time.time()
        self.link_cpu = link_cpu_ms()

    def report(self):
        hook = json.loads(os.environ["BENCH_HOOK"])
        return {"hook_ms": hook["ms"], "live_part_ms": hook["live_ms"],
                "hook_to_ready_ms": (self.ready - hook["end"]) * 1000,
                "link_cpu_at_ready_ms": self.link_cpu,
                "cpu_at_answer_ms": process_cpu_ms(), "link_cpu_at_answer_ms": link_cpu_ms(),
                "exec": exec_time(), "hook_began": hook["began"], "hook_end": hook["end"],
                "answered": time.time()}


print("READY", flush=True)
for _ in sys.stdin:
    start, created = time.perf_counter(), time.time()
    probe = Probe.remote()
    found = ray.get(probe.report.remote())
    found["start_ms"] = (time.perf_counter() - start) * 1000
    # where the time goes, on the epoch clock that the worker shares
    found["create_to_exec_ms"] = (found.pop("exec") - created) * 1000
    found["exec_to_hook_ms"] = (found["hook_began"] - created) * 1000 - found[
        "create_to_exec_ms"]
    found["hook_to_answer_ms"] = (found["answered"] - found.pop("hook_end")) * 1000
    back = time.time()
    found["answer_to_driver_ms"] = (back - found.pop("answered")) * 1000
    # from the setup hook's start to the answer at the driver: all that raydebug can change
    # (before its hook it does nothing in a worker), without the noise of Ray's exec
    found["hook_to_driver_ms"] = (back - found["hook_began"]) * 1000
    del found["hook_began"]
    ray.kill(probe)
    print("START", json.dumps(found), flush=True)
"""


def paired(first: list[float], second: list[float]) -> dict[str, float]:
    """``first - second`` round by round (interleaved: the same moment of the machine)."""
    return median_ci([a - b for a, b in zip(first, second, strict=True)])


def interleaved_starts(cluster: Any, rounds: int) -> dict[str, Any]:
    """Worker start, end to end and inside the worker, the three modes in turn."""
    script = Path(tempfile.mkdtemp(prefix="live-bench")) / "starter.py"
    script.write_text(STARTER)
    drivers = {mode: subprocess.Popen(
        [sys.executable, str(script), mode, cluster.address], env={**os.environ, **ENV},
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True) for mode in MODES}
    found: dict[str, list[dict[str, float]]] = {mode: [] for mode in MODES}
    try:
        for mode, proc in drivers.items():
            assert proc.stdout is not None
            if proc.stdout.readline().strip() != "READY":
                raise RuntimeError(f"the {mode} starter failed")
        for round_ in range(rounds + 1):  # the first round warms up (imports, leases)
            for mode in (MODES if round_ % 2 == 0 else tuple(reversed(MODES))):
                proc = drivers[mode]
                assert proc.stdin is not None and proc.stdout is not None
                proc.stdin.write("start\n")
                proc.stdin.flush()
                line = proc.stdout.readline()
                if not line.startswith("START"):
                    raise RuntimeError(f"the {mode} starter failed: {line!r}")
                if round_:
                    found[mode].append(json.loads(line.split(" ", 1)[1]))
    finally:
        for proc in drivers.values():
            finish(proc)

    def series(mode: str, name: str) -> list[float]:
        return [entry[name] for entry in found[mode]]

    return {
        "rounds": rounds,
        "start_ms": {mode: median_ci(series(mode, "start_ms")) for mode in MODES},
        "start_ms_all": {mode: [round(v, 1) for v in series(mode, "start_ms")]
                         for mode in MODES},
        "start_extra_ms_live_vs_off": paired(series("live", "start_ms"),
                                             series("off", "start_ms")),
        "start_extra_ms_live_vs_plain": paired(series("live", "start_ms"),
                                               series("plain", "start_ms")),
        "hook_to_driver_ms": {mode: median_ci(series(mode, "hook_to_driver_ms"))
                              for mode in MODES},
        "hook_to_driver_extra_ms_live_vs_plain": paired(series("live", "hook_to_driver_ms"),
                                                        series("plain", "hook_to_driver_ms")),
        "hook_to_driver_extra_ms_live_vs_off": paired(series("live", "hook_to_driver_ms"),
                                                      series("off", "hook_to_driver_ms")),
        "hook_ms": {mode: median_ci(series(mode, "hook_ms")) for mode in MODES},
        "hook_extra_ms_live_vs_off": paired(series("live", "hook_ms"),
                                            series("off", "hook_ms")),
        "live_part_ms": median_ci(series("live", "live_part_ms")),
        "hook_to_ready_ms": {mode: median_ci(series(mode, "hook_to_ready_ms"))
                             for mode in MODES},
        "hook_to_ready_extra_ms_live_vs_off": paired(series("live", "hook_to_ready_ms"),
                                                     series("off", "hook_to_ready_ms")),
        "link_cpu_at_ready_ms": median_ci(series("live", "link_cpu_at_ready_ms")),
        "cpu_at_answer_ms": {mode: median_ci(series(mode, "cpu_at_answer_ms"))
                             for mode in MODES},
        "cpu_at_answer_extra_ms_live_vs_off": paired(series("live", "cpu_at_answer_ms"),
                                                     series("off", "cpu_at_answer_ms")),
        "link_cpu_at_answer_ms": median_ci(series("live", "link_cpu_at_answer_ms")),
        "phases_ms": {phase: {mode: median_ci(series(mode, phase)) for mode in MODES}
                      for phase in PHASES},
        "phases_extra_ms_live_vs_off": {phase: paired(series("live", phase),
                                                      series("off", phase))
                                        for phase in PHASES},
    }


def plain_process_start(rounds: int) -> dict[str, Any]:
    """``python -c pass`` with ``RAYDEBUG_LIVE=1`` (linked through the startup ``.pth`` to a
    real hub) against without, interleaved."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import core

    hub = core.start_hub("--log-level", "warning")
    times: dict[str, list[float]] = {"live": [], "none": []}
    try:
        environments = {"live": hub.env(RAYDEBUG_LIVE="1"), "none": hub.env()}
        for round_ in range(rounds + 1):
            for mode in (("live", "none") if round_ % 2 == 0 else ("none", "live")):
                start = time.perf_counter()
                subprocess.run([sys.executable, "-c", "pass"], env=environments[mode],
                               check=True, timeout=60, capture_output=True)
                if round_:
                    times[mode].append((time.perf_counter() - start) * 1000)
    finally:
        hub.close()
    return {"ms": {mode: median_ci(values) for mode, values in times.items()},
            "extra_ms": paired(times["live"], times["none"])}


def local_cluster(keep_idle_workers: bool) -> Any:
    """A one-node ``ray.cluster_utils.Cluster`` on loopback with 2 CPUs."""
    from ray.cluster_utils import Cluster

    config = {"num_workers_soft_limit": int(
        ray_bench.KEEP_IDLE_WORKERS["RAY_num_workers_soft_limit"])} if keep_idle_workers else {}
    return Cluster(initialize_head=True, head_node_args={
        "num_cpus": 2, "node_ip_address": "127.0.0.1", "include_dashboard": False,
        "_system_config": config})


def run(tasks: int, pairs: int, actors: int, idle_seconds: float, starts: int = 20,
        only_start: bool = False) -> dict[str, Any]:
    os.environ.update(ENV)
    cluster = local_cluster(keep_idle_workers=False)  # worker starts as Ray makes them
    try:
        started = {"worker_start": interleaved_starts(cluster, starts),
                   "plain_process_start": plain_process_start(starts),
                   "link_start_ms": link_start_ms()}
    finally:
        cluster.shutdown()
    if only_start:
        return started
    cluster = local_cluster(keep_idle_workers=True)  # see ray_bench.KEEP_IDLE_WORKERS
    try:
        script = Path(tempfile.mkdtemp(prefix="live-bench")) / "live_driver.py"
        script.write_text(DRIVER)
        flow = ray_bench.interleaved_throughput(cluster.address, MODES, pairs, tasks)
        results: dict[str, Any] = {
            "throughput": flow,
            "throughput_live_vs_plain": flow["live_vs_plain"],
            "throughput_off_vs_plain": flow["off_vs_plain"]}
        for mode in MODES:
            proc, result = drive(script, mode, cluster, actors)
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
        results.update(started)
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
    parser.add_argument("--tasks", type=int, default=ray_bench.ROUND_TASKS,
                        help="No-op tasks per throughput round.")
    parser.add_argument("--pairs", type=int, default=ray_bench.ROUND_PAIRS,
                        help="Throughput rounds (one per mode each).")
    parser.add_argument("--actors", type=int, default=6)
    parser.add_argument("--idle-seconds", type=float, default=60.0)
    parser.add_argument("--starts", type=int, default=20,
                        help="Rounds of interleaved worker starts (one per mode each).")
    parser.add_argument("--only-start", action="store_true",
                        help="Measure the starts alone.")
    args = parser.parse_args()
    ray_bench.compile_raydebug()
    results = run(args.tasks, args.pairs, args.actors, args.idle_seconds, args.starts,
                  args.only_start)
    print(json.dumps(results, indent=2))
    print(start_table(results))
    if "throughput" in results:
        flow = results["throughput"]
        for mode in MODES[1:]:
            wall, cpu = flow[f"{mode}_vs_plain"], flow[f"{mode}_vs_plain_cpu"]
            print(f"throughput {mode} / plain ({flow['pairs']} x {flow['tasks']} tasks, "
                  f"paired): {wall['median']:.3f} [{wall['ci_low']:.3f}, "
                  f"{wall['ci_high']:.3f}], CPU {cpu['median']:.3f} [{cpu['ci_low']:.3f}, "
                  f"{cpu['ci_high']:.3f}]")


def start_table(results: dict[str, Any]) -> str:
    """The start figures: medians with their 95% intervals, the target's row first."""
    def ci(found: dict[str, float]) -> str:
        return (f"{found['median']:+.1f} ms [{found['ci_low']:+.1f}, {found['ci_high']:+.1f}]"
                f" n={found['n']:g}")

    def ms(found: dict[str, float]) -> str:
        return f"{found['median']:.1f} ms"

    start = results["worker_start"]
    plain = results["plain_process_start"]
    rows = [
        ("worker start (median, 95% CI)", "value", "target"),
        ("end to end: live - off (paired)", ci(start["start_extra_ms_live_vs_off"]),
         "<= +10 ms"),
        ("end to end: live - plain (paired)", ci(start["start_extra_ms_live_vs_plain"]), "-"),
        ("  plain / off / live", " / ".join(ms(start["start_ms"][m]) for m in MODES), "-"),
        ("setup hook -> answer at the driver: live - plain",
         ci(start["hook_to_driver_extra_ms_live_vs_plain"]), "<= +10 ms"),
        ("  live - off", ci(start["hook_to_driver_extra_ms_live_vs_off"]), "-"),
        ("  plain / off / live",
         " / ".join(ms(start["hook_to_driver_ms"][m]) for m in MODES), "-"),
        ("in the worker: setup hook, live - off", ci(start["hook_extra_ms_live_vs_off"]),
         "<= +10 ms"),
        ("  in it: the link's part (ids, start_live_link)", ms(start["live_part_ms"]),
         "<= 10 ms"),
        ("  setup hook plain / off / live",
         " / ".join(ms(start["hook_ms"][m]) for m in MODES), "-"),
        ("  hook end -> actor __init__, live - off",
         ci(start["hook_to_ready_extra_ms_live_vs_off"]), "-"),
        ("  link thread CPU until __init__ (bound)", ms(start["link_cpu_at_ready_ms"]), "-"),
        ("worker CPU, start -> first answer, live - off",
         ci(start["cpu_at_answer_extra_ms_live_vs_off"]), "-"),
        ("  in it: the link thread's", ms(start["link_cpu_at_answer_ms"]), "-"),
        ("  worker CPU plain / off / live",
         " / ".join(ms(start["cpu_at_answer_ms"][m]) for m in MODES), "-"),
        ("end to end by phase, live - off (plain / off / live)", "", "-"),
        *((f"  {phase.removesuffix('_ms').replace('_', ' ')}",
           f"{ci(start['phases_extra_ms_live_vs_off'][phase])} "
           f"({' / '.join(ms(start['phases_ms'][phase][m]) for m in MODES)})", "-")
          for phase in PHASES),
        ("start_live_link on the caller's thread", f"{results['link_start_ms']:.1f} ms", "-"),
        ("python -c pass: RAYDEBUG_LIVE=1 - none", ci(plain["extra_ms"]), "-"),
    ]
    widths = [max(len(row[i]) for row in rows) for i in range(3)]
    return "\n".join("  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True))
                     .rstrip() for row in rows)


if __name__ == "__main__":
    main()
