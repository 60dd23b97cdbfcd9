"""raydebug vs Ray's built-in debugger (RAY_DEBUG=1 + debugpy), same local Ray, same run.

Ray's paused workers are found as Ray's VS Code extension finds them: polling the
dashboard's /api/v0/workers?detail=true for num_paused_threads > 0, then attaching to the
worker's debugpy port. raydebug's are found by a long-poll on the hub.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import core
from raydebug.client.dap import DapClient

HERE = Path(__file__).resolve().parent
ENV = {"RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0", "RAY_AUTH_MODE": "token",
       "PATH": os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", ""),
       "PYDEVD_DISABLE_FILE_VALIDATION": "1"}


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
            env={**os.environ, **ENV}, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
            text=True)
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            if "Ray runtime started" in line:
                break
        token_path = Path(os.environ.get("RAY_AUTH_TOKEN_PATH",
                                         Path.home() / ".ray" / "auth_token"))
        self.token = token_path.read_text().strip() if token_path.exists() else ""
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


def start_hub(cluster: LocalRay) -> float:
    """Start the cluster's hub actor as a first breakpoint would; return how long it took."""
    result = subprocess.run([sys.executable, "-c", START_HUB, cluster.gcs], capture_output=True,
                            text=True, env={**os.environ, **ENV}, timeout=300, check=True)
    words = next(line for line in result.stdout.splitlines() if line.startswith("HUB")).split()
    cluster.hub_client = words[1]
    return float(words[2])


THROUGHPUT = """
import sys, time, ray
mode, address, count = sys.argv[1], sys.argv[2], int(sys.argv[3])
env = {}
if mode == "raydebug":
    import raydebug
    env = raydebug.runtime_env()
ray.init(address=address, runtime_env=env, logging_level="ERROR", log_to_driver=False)

@ray.remote(num_cpus=1)  # one worker per CPU, as a real job would: a fair pool to compare
def noop(i):
    return sum(range(1000)) + i

ray.get([noop.remote(i) for i in range(count // 4)])  # warm the worker pool up
start = time.perf_counter()
ray.get([noop.remote(i) for i in range(count)])
print("SECONDS", time.perf_counter() - start, flush=True)
"""


def throughput(cluster: LocalRay, count: int = 2000, repeats: int = 3) -> dict[str, Any]:
    """Tasks per second with raydebug enabled (no breakpoint hit) vs plain Ray.

    Runs alternate A-B-B-A so that a drift of the machine (it has 2 cores) does not favour
    either side; the ratio is of medians.
    """
    script = Path(cluster.temp) / "throughput.py"
    script.write_text(THROUGHPUT)
    times: dict[str, list[float]] = {"plain": [], "raydebug": []}
    for repeat in range(repeats * 2):
        order = ("plain", "raydebug") if repeat % 2 == 0 else ("raydebug", "plain")
        for mode in order:
            out = subprocess.run([sys.executable, str(script), mode, cluster.gcs, str(count)],
                                 capture_output=True, text=True, env={**os.environ, **ENV},
                                 timeout=600, check=True).stdout
            seconds = [line.split()[1] for line in out.splitlines() if line.startswith("SECONDS")]
            times[mode].append(float(seconds[-1]))
    median = {mode: statistics.median(values) for mode, values in times.items()}
    return {"tasks": count, "seconds": times, "ratio": median["plain"] / median["raydebug"]}


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
