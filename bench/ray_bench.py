"""raydebug vs Ray's built-in debugger (RAY_DEBUG=1 + debugpy), same local Ray, same run.

Ray's paused workers are found as Ray's VS Code extension finds them: polling the
dashboard's /api/v0/workers?detail=true for num_paused_threads > 0, then attaching to the
worker's debugpy port. raydebug's are found by a long-poll on the hub.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
import uuid
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import core
from raydebug.client.dap import DapClient

HERE = Path(__file__).resolve().parent
# Token authentication with the bench's own token: `ray start` with RAY_AUTH_MODE=token
# fails when it finds no token, and ~/.ray/auth_token exists only once a local ray.init()
# has written it (not on a fresh machine: the first `make bench` there failed).
ENV = {"RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0", "RAY_AUTH_MODE": "token",
       "RAY_AUTH_TOKEN": uuid.uuid4().hex,
       "PATH": os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", ""),
       "PYDEVD_DISABLE_FILE_VALIDATION": "1"}

# Idle workers are kept up to this many (Ray's default: one per CPU, killed after 1 s idle).
# The throughput rounds alternate two jobs on 2 CPUs: without it each job's round killed
# the other's idle workers, and every round measured two worker starts instead of tasks.
KEEP_IDLE_WORKERS = {"RAY_num_workers_soft_limit": "8"}


def compile_raydebug() -> None:
    """Write raydebug's bytecode, as pip does for an installed package. An editable checkout
    run with ``PYTHONDONTWRITEBYTECODE=1`` (this machine's shell sets it) has none, and
    every process would compile raydebug's modules at its start: ~10 ms of a Ray worker's
    setup hook that no user pays."""
    import compileall

    import raydebug

    compileall.compile_dir(str(Path(raydebug.__file__).parent), quiet=1)


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


class LocalRay:
    """`ray start --head --block` on loopback with its dashboard; stopped by its pid."""

    def __init__(self) -> None:
        self.gcs = f"127.0.0.1:{free_port()}"
        self.dashboard = f"http://127.0.0.1:{free_port()}"
        self.temp = tempfile.mkdtemp(prefix="raybench")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "ray.scripts.scripts", "start", "--head", "--block",
             f"--port={self.gcs.rsplit(':', 1)[1]}",
             f"--dashboard-port={self.dashboard.rsplit(':', 1)[1]}",
             "--dashboard-host=127.0.0.1", "--node-ip-address=127.0.0.1", "--num-cpus=2",
             "--include-dashboard=true", f"--temp-dir={self.temp}",
             f"--dashboard-agent-listen-port={free_port()}"],
            env={**os.environ, **ENV, **KEEP_IDLE_WORKERS}, stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT, text=True)
        assert self.proc.stdout is not None
        said = []
        for line in self.proc.stdout:
            said.append(line)
            if "Ray runtime started" in line:
                break
        else:  # it exited: say what it said rather than fail later, elsewhere
            self.proc.wait(timeout=60)
            raise RuntimeError(f"ray start --head failed (status {self.proc.returncode}):\n"
                               + "".join(said[-40:]))
        self.token = ENV["RAY_AUTH_TOKEN"]
        self.hub_client = ""

    def paused_workers(self) -> list[dict[str, Any]]:
        request = urllib.request.Request(
            f"{self.dashboard}/api/v0/workers?detail=true&limit=1000",
            headers={"Authorization": f"Bearer {self.token}"} if self.token else {})
        with urllib.request.urlopen(request, timeout=30) as response:
            data = json.loads(response.read())
        workers = data["data"]["result"]["result"]
        return [w for w in workers if (w.get("num_paused_threads") or 0) > 0]

    def close(self) -> None:
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=30)


def read_mark(path: Path, timeout: float = 120) -> tuple[float, int, int]:
    deadline = time.monotonic() + timeout
    while not path.exists() or not path.read_text().strip():
        if time.monotonic() > deadline:
            raise TimeoutError(f"no mark {path}")
        time.sleep(0.005)
    called, rss, pid = path.read_text().split()
    return float(called), int(rss), int(pid)


def run_mode(mode: str, cluster: LocalRay, requests: int, steps: int,
             rounds: int, kill_rounds: int = 3) -> dict[str, Any]:
    marks = Path(cluster.temp) / f"mark-{mode}"
    adapters_before = core.adapter_pids()
    err_path = core.worker_stderr_file(f"ray-{mode}")  # the driver's, with Ray's worker logs
    with err_path.open("w") as err:
        driver = subprocess.Popen(
            [sys.executable, str(HERE / "ray_target.py"), mode, cluster.gcs, str(marks),
             str(rounds + kill_rounds)], env={**os.environ, **ENV}, stdout=subprocess.PIPE,
            stderr=err, text=True)
    failed = True
    listed, results, extra_rss, extra_processes = core.Sample(), [], [], []
    previous = None
    # The hub is found once, before the job starts: looking it up is not part of the
    # measure (the first breakpoint of a fresh cluster also starts the hub: see hub_start).
    client_address = cluster.hub_client if mode == "raydebug" else ""
    try:
        for round_number in range(rounds):
            if mode == "raydebug":
                session = core.wait_listed(client_address, previous)
                seen = time.time()
                previous = session["id"]
                host, port = client_address.rsplit(":", 1)
                address, session_id = (host, int(port)), session["id"]
            else:
                while not (paused := cluster.paused_workers()):
                    pass  # the dashboard call itself takes the time; as the extension does
                seen = time.time()
                address, session_id = ("127.0.0.1", int(paused[0]["debugger_port"])), None
            called, rss_before, pid = read_mark(Path(f"{marks}.{round_number}"))
            listed.values.append(seen - called)

            def footprint(before: int = rss_before, pid: int = pid) -> None:
                adapters = core.adapter_pids() - adapters_before
                extra_processes.append(len(adapters))
                extra_rss.append(core.rss_kib(pid) - before
                                 + sum(core.rss_kib(a) for a in adapters))

            async def one(address: tuple[str, int] = address,
                          session_id: str | None = session_id,
                          requests: int = requests if round_number == rounds - 1 else 0,
                          ) -> dict[str, Any]:  # request latencies: last round only
                client = await DapClient.connect(*address)
                return await core.measure_session(client, session_id, requests, steps,
                                                  footprint)

            results.append(asyncio.run(asyncio.wait_for(one(), 600)))
        kills = [kill_to_gone(mode, cluster, Path(f"{marks}.{number}"))
                 for number in range(rounds, rounds + kill_rounds)]
        driver.communicate(timeout=300)
        failed = False
    finally:
        core.stop(driver)
        if failed:  # the hub actor logs to Ray's session logs (the driver's stderr has them)
            core.report_failure(f"ray bench, mode {mode}", err_path, None)
        err_path.unlink(missing_ok=True)
    return {
        "listed_first": listed.values[0],
        "listed_later": core.Sample(listed.values[1:]).summary() if rounds > 1 else None,
        "connect_to_stopped_first": results[0]["connect_to_stopped"],
        "connect_to_stopped_later": core.Sample([r["connect_to_stopped"] for r in results[1:]])
        .summary() if rounds > 1 else None,
        **{command: results[-1][command] for command in (*core.REQUESTS, "next_to_stopped")},
        "extra_processes": max(extra_processes),
        "extra_rss_mb": extra_rss[0] * 1024 / 1e6,
        "kill_to_gone": core.Sample([k["gone"] for k in kills]).summary(),
        "kill_still_paused": any(k["still_paused"] for k in kills),
    }


KILL_TIMEOUT = 10.0


def listed_pids(mode: str, cluster: LocalRay) -> dict[int, dict[str, Any]]:
    """Paused processes as each debugger's list shows them, by pid."""
    if mode == "raydebug":
        url = f"http://{cluster.hub_client}/api/sessions"
        with urllib.request.urlopen(url, timeout=30) as response:
            return {s["pid"]: s for s in json.loads(response.read())}
    return {w["pid"]: w for w in cluster.paused_workers()}


def kill_to_gone(mode: str, cluster: LocalRay, mark: Path) -> dict[str, Any]:
    """SIGKILL a paused worker; time until its list stops offering it (polled at once).

    Ray's dashboard keeps a killed worker with its last ``num_paused_threads``; only its
    ``is_alive`` turns false. So for Ray "gone" means is_alive false (a client that filters
    on num_paused_threads alone (docs/design.md#ray-paused-list) would list it for good:
    ``still_paused``).
    """
    _, _, pid = read_mark(mark)
    while pid not in listed_pids(mode, cluster):
        pass
    start = time.perf_counter()
    os.kill(pid, signal.SIGKILL)
    while time.perf_counter() - start < KILL_TIMEOUT:
        entry = listed_pids(mode, cluster).get(pid)
        if entry is None or entry.get("is_alive") is False:
            return {"gone": time.perf_counter() - start, "still_paused": entry is not None}
    raise TimeoutError(f"{mode}: pid {pid} still listed {KILL_TIMEOUT} s after SIGKILL")


START_HUB = """
import sys, time, ray
from raydebug.integrations.ray import find_or_start_hub
ray.init(address=sys.argv[1], logging_level="ERROR")
start = time.perf_counter()
info = find_or_start_hub()
print("HUB", info.client, time.perf_counter() - start, flush=True)
"""


START_HUB_TIMEOUT = 300


def said(what: str, *outputs: str | bytes | None) -> None:
    """Print on stderr what a failed part of the bench wrote."""
    text = "".join(o.decode(errors="replace") if isinstance(o, bytes) else o or ""
                   for o in outputs)
    print(f"--- {what} ---\n{text}", file=sys.stderr, flush=True)


def start_hub(cluster: LocalRay) -> float:
    """Start the cluster's hub actor as a first breakpoint would; return how long it took."""
    try:
        result = subprocess.run([sys.executable, "-c", START_HUB, cluster.gcs],
                                capture_output=True, text=True, env={**os.environ, **ENV},
                                timeout=START_HUB_TIMEOUT)
    except subprocess.TimeoutExpired as expired:
        said(f"start_hub: no hub after {START_HUB_TIMEOUT} s", expired.stdout, expired.stderr)
        raise
    if result.returncode != 0:
        said(f"start_hub failed (status {result.returncode})", result.stdout, result.stderr)
        raise RuntimeError(f"start_hub: the hub actor did not start (status "
                           f"{result.returncode}; its output is above)")
    words = next(line for line in result.stdout.splitlines() if line.startswith("HUB")).split()
    cluster.hub_client = words[1]
    return float(words[2])


ROUNDS_DRIVER = """
import os, sys, time, ray
mode, address, tasks = sys.argv[1], sys.argv[2], int(sys.argv[3])
env = {}
if mode != "plain":  # live: raydebug's default; off: its setup hook without the link;
    # snapshots: live with failure snapshots on (raydebug run --snapshots)
    os.environ["RAYDEBUG_LIVE"] = "0" if mode == "off" else "1"
    import raydebug
    env = raydebug.runtime_env(snapshots=mode == "snapshots")
ray.init(address=address, runtime_env=env, logging_level="ERROR", log_to_driver=False)

@ray.remote(num_cpus=1)  # one worker per CPU, as a real job would: a fair pool to compare
def noop(i):
    sum(range(1000))
    return os.getpid()

def cpu_seconds(pid):
    # CPU of every thread of a process so far (schedstat: ns on the CPU)
    total = 0
    try:
        for tid in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{tid}/schedstat") as handle:
                total += int(handle.read().split()[0])
    except OSError:  # a thread (or a killed worker) gone meanwhile
        pass
    return total / 1e9

workers = set()

def round_(count):
    before = {pid: cpu_seconds(pid) for pid in (os.getpid(), *workers)}
    start = time.perf_counter()
    pids = set(ray.get([noop.remote(i) for i in range(count)]))
    seconds = time.perf_counter() - start
    # the CPU of the driver and of the workers that ran the round (an idle one's is not
    # the tasks'); a worker new in this round is counted from its start
    cpu = sum(cpu_seconds(pid) - before.get(pid, 0.0) for pid in (os.getpid(), *pids))
    workers.update(pids)
    return seconds, cpu, sorted(pids)

for _ in range(40):  # warm: this job's two workers started and leased
    round_(tasks)
    if len(workers) >= 2:
        break
print("READY", flush=True)
for line in sys.stdin:
    seconds, cpu, pids = round_(int(line))
    print("ROUND", seconds, cpu, *pids, flush=True)
"""


def median_ci(values: list[float], resamples: int = 2000) -> dict[str, float]:
    """The median of ``values`` and a bootstrap 95% confidence interval of it."""
    chooser = random.Random(0)
    medians = sorted(statistics.median(chooser.choices(values, k=len(values)))
                     for _ in range(resamples))
    return {"median": statistics.median(values), "ci_low": medians[int(resamples * 0.025)],
            "ci_high": medians[int(resamples * 0.975)], "n": len(values)}


def interleaved_throughput(address: str, modes: tuple[str, ...], pairs: int = 40,
                           tasks: int = 200, warm_rounds: int = 2,
                           env: dict[str, str] | None = None) -> dict[str, Any]:
    """Task throughput of each mode against the first (``plain``), paired and interleaved.

    One long-lived driver per mode (a job of its own, its own warm workers), all connected
    to the cluster at ``address`` at once; round after round each runs ``tasks`` no-op
    tasks in turn, always in the same cycle (A-B-A-B): a job that ran the round before
    its own finds warmer caches, 2-4% faster here, so A-B-B-A favoured whichever came
    second. Each round of a mode is compared with the first mode's rounds on either side
    of it (:func:`bracketed`), moments of the machine a fraction of a second apart, so
    the load of its 2 shared cores cancels out; the figure is the median of those ratios
    with a bootstrap 95% interval, for the wall time and for the CPU of the job's driver
    and of the workers that ran the round (``/proc/<pid>/task/*/schedstat``: what a cost
    per task would add, with much less noise than the wall time). A round in which a job
    got a new worker is counted in ``worker_restarts``.
    """
    script = Path(tempfile.mkdtemp(prefix="throughput")) / "rounds.py"
    script.write_text(ROUNDS_DRIVER)
    drivers = {mode: subprocess.Popen(
        [sys.executable, str(script), mode, address, str(tasks)],
        env={**os.environ, **ENV, **(env or {})}, stdin=subprocess.PIPE,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for mode in modes}
    seconds: dict[str, list[float]] = {mode: [] for mode in modes}
    cpu: dict[str, list[float]] = {mode: [] for mode in modes}
    workers: dict[str, set[str]] = {mode: set() for mode in modes}
    restarts = 0
    started = time.perf_counter()
    try:
        for mode, proc in drivers.items():
            assert proc.stdout is not None
            if proc.stdout.readline().strip() != "READY":
                raise RuntimeError(f"the {mode} throughput driver failed: "
                                   f"{proc.stderr.read() if proc.stderr else ''}")
        for round_ in range(warm_rounds + pairs + 1):  # the last: the first mode's only
            for mode in (modes if round_ < warm_rounds + pairs else modes[:1]):
                proc = drivers[mode]
                assert proc.stdin is not None and proc.stdout is not None
                proc.stdin.write(f"{tasks}\n")
                proc.stdin.flush()
                words = proc.stdout.readline().split()
                if not words or words[0] != "ROUND":
                    raise RuntimeError(f"the {mode} throughput driver failed: "
                                       f"{proc.stderr.read() if proc.stderr else ''}")
                pids = set(words[3:])
                if round_ >= warm_rounds:
                    seconds[mode].append(float(words[1]))
                    cpu[mode].append(float(words[2]))
                    restarts += bool(workers[mode]) and not pids <= workers[mode]
                workers[mode] |= pids
    finally:
        for proc in drivers.values():  # end of stdin: the driver leaves Ray as a job does
            if proc.stdin is not None:
                proc.stdin.close()
            try:
                proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                core.stop(proc)
    first = modes[0]
    return {"tasks": tasks, "pairs": pairs, "seconds": seconds, "cpu_seconds": cpu,
            "worker_restarts": restarts, "wall_seconds": time.perf_counter() - started,
            **{f"{mode}_vs_{first}": median_ci(bracketed(seconds[first], seconds[mode]))
               for mode in modes[1:]},
            **{f"{mode}_vs_{first}_cpu": median_ci(bracketed(cpu[first], cpu[mode]))
               for mode in modes[1:]}}


def bracketed(first: list[float], other: list[float]) -> list[float]:
    """Round ``i``'s ratio ``first / other``, ``first`` taken as the geometric mean of its
    rounds just before and just after (``first`` has one more round): a drift of the machine
    during the pair cancels out."""
    return [(first[i] * first[i + 1]) ** 0.5 / value for i, value in enumerate(other)]


# Many short rounds: the noise of a round is the machine's load of that moment, which the
# bracketing cancels better the shorter the round; 600 x 20 takes 80-90 s (load 5-15, 2 cores)
# and bounds the ratio to ~+-3% there, its CPU to ~+-1.5%; the wall ratio also moves ~+-3%
# from run to run (which workers a job got), the CPU's does not (docs/design.md#live-link).
ROUND_TASKS = 20
ROUND_PAIRS = 600


def throughput(cluster: LocalRay, pairs: int = ROUND_PAIRS,
               tasks: int = ROUND_TASKS) -> dict[str, Any]:
    """Tasks per second with raydebug enabled (live link on, no breakpoint hit) vs plain
    Ray: :func:`interleaved_throughput`, ``ratio`` its median with ``ci_low``/``ci_high``."""
    found = interleaved_throughput(cluster.gcs, ("plain", "live"), pairs, tasks)
    ratio, cpu = found.pop("live_vs_plain"), found.pop("live_vs_plain_cpu")
    return {**found, "ratio": ratio["median"], "ci_low": ratio["ci_low"],
            "ci_high": ratio["ci_high"], "cpu": cpu}


def run(requests: int = 200, steps: int = 100, rounds: int = 3) -> dict[str, Any]:
    cluster = LocalRay()
    try:
        results: dict[str, Any] = {"hub_start": start_hub(cluster)}
        for mode in ("raydebug", "ray"):
            print(f"measuring {mode} on a local Ray...", file=sys.stderr, flush=True)
            results[mode] = run_mode(mode, cluster, requests, steps, rounds)
        print("measuring task throughput...", file=sys.stderr, flush=True)
        results["throughput"] = throughput(cluster)
        return results
    finally:
        cluster.close()


if __name__ == "__main__":
    print(json.dumps(run(50, 20, 2), indent=1))
