"""`raydebug link`: how long linking running processes takes, and what a linked process
feels, beside ``debugpy --pid`` (gdb injection) measured in the same run.

- N plain processes (main thread blocked in C, no raydebug variable) linked in one call, in
  parallel, as `raydebug link pid=... pid=...` does: the total until the hub lists them
  all, and each process's own link time (ptrace, the bootstrap, its answer); then a few
  linked one at a time (one link's cost without the CPU of the others beside it);
- the gap a busy loop sees: one process whose second thread spins in Python, recording the
  longest pause between two of its iterations, over a window with a link in it and over a
  window of the same length without (the machine's own noise), ``repeats`` times;
- a pause of that busy process, once linked: `raydebug pause pid=P` until its session is
  listed (its first pause imports and starts pydevd beside the spinning thread:
  docs/design.md#first-pause), beside ``py-spy dump --pid P`` of the same process (the
  usual look into a busy process, which stops nothing);
- the baseline: ``python -m debugpy --listen 127.0.0.1:0 --pid P`` on a like process, its
  wall time, and whether the process survived it (gdb 13 on a CPU with AMX cannot call a
  function in it: docs/design.md#linking).

Run alone: ``python bench/link.py [N]``; or within ``bench/run.py`` (section ``link``).
"""

from __future__ import annotations

import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from devtools.processes import HubProcess, read_line, start_hub, stop
from raydebug.client import hub_api
from raydebug.linking.local import link_pids, wait_listed
from raydebug.linking.ticket import HubForAgents

BLOCKED = """
import threading
print("ready", flush=True)
threading.Event().wait()
"""

# Its spinning thread keeps the longest gap between two iterations since the last "reset"
# line on stdin (done by that thread itself: a reset written by the main thread could be
# lost in its read-max-write); "gap" prints it (ms). The main thread waits in read(): in C.
SPINNING = """
import sys, threading, time
longest = 0.0
asked = done = 0  # resets asked by the main thread, and done by the spinning one

def spin():
    global longest, done
    last = time.perf_counter()
    while True:
        now = time.perf_counter()
        if done != asked:  # only this thread writes longest: no reset is lost
            longest, done = 0.0, asked
        longest = max(longest, now - last)
        last = now

threading.Thread(target=spin, daemon=True).start()
print("ready", flush=True)
for line in sys.stdin:
    if line.strip() == "reset":
        asked += 1
        while done != asked:
            time.sleep(0.001)
        print("reset", flush=True)
    elif line.strip() == "gap":
        print(f"{longest * 1000:.3f}", flush=True)
"""


def plain_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("RAYDEBUG") and k != "PYTHONBREAKPOINT"}
    env["PYTHONPATH"] = str(Path(__file__).resolve().parents[1] / "src")
    return env


def start(script: Path, stdin: bool = False) -> subprocess.Popen[str]:
    proc = subprocess.Popen([sys.executable, str(script)], env=plain_env(), text=True,
                            stdin=subprocess.PIPE if stdin else subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    assert read_line(proc).strip() == "ready"
    return proc


def agents_hub(hub: HubProcess) -> HubForAgents:
    return HubForAgents(hub.agent_address, hub.token)


def listed_pids(hub: HubProcess) -> set[int]:
    host = socket.gethostname()
    return {int(p["pid"]) for p in hub_api.processes(hub.client_address, (), now=False)
            if p.get("host") == host and p.get("live")}


def link_many(hub: HubProcess, folder: Path, count: int, alone: int = 5) -> dict[str, Any]:
    """``count`` processes linked in one call, in parallel; then ``alone`` more, one at a
    time (the cost of one link without the others' CPU beside it)."""
    script = folder / "blocked.py"
    script.write_text(BLOCKED)
    procs = [start(script) for _ in range(count + alone)]
    many, single = procs[:count], procs[count:]
    try:
        started = time.perf_counter()
        outcomes = link_pids([p.pid for p in many], agents_hub(hub))
        linked = time.perf_counter() - started
        shown = wait_listed([p.pid for p in many], lambda: listed_pids(hub), 60)
        total = time.perf_counter() - started
        each = [o.seconds for o in outcomes if o.status == "linked"]
        one_by_one = [o.seconds for p in single for o in link_pids([p.pid], agents_hub(hub))
                      if o.status == "linked"]
        return {"count": count, "linked": len(each), "listed": len(shown),
                "link_seconds": linked, "total_seconds": total,
                "each": summary(each), "alone": summary(one_by_one),
                "failed": [o.line for o in outcomes if not o.ok]}
    finally:
        for proc in procs:
            stop(proc)


def ask(proc: subprocess.Popen[str], line: str) -> str:
    assert proc.stdin is not None
    proc.stdin.write(line + "\n")
    proc.stdin.flush()
    return read_line(proc).strip()


def gaps(hub: HubProcess, folder: Path, repeats: int) -> dict[str, Any]:
    """The longest gap a spinning thread saw over a link, and over as long without one."""
    script = folder / "spinning.py"
    script.write_text(SPINNING)
    linked, idle = [], []
    for _ in range(repeats):
        proc = start(script, stdin=True)
        try:
            time.sleep(0.3)  # its start over
            ask(proc, "reset")
            started = time.perf_counter()
            [outcome] = link_pids([proc.pid], agents_hub(hub))
            wait_listed([proc.pid], lambda: listed_pids(hub), 30)
            window = time.perf_counter() - started
            assert outcome.status == "linked", outcome.line
            linked.append(float(ask(proc, "gap")))
            ask(proc, "reset")
            time.sleep(window)
            idle.append(float(ask(proc, "gap")))
        finally:
            stop(proc)
    return {"with_link_ms": summary(linked), "without_ms": summary(idle),
            "with_link_each": linked, "without_each": idle}


def pause_busy(hub: HubProcess, folder: Path, repeats: int) -> dict[str, Any]:
    """`raydebug pause` of a linked process whose second thread spins in Python, until its
    session is listed; ``py-spy dump`` of the same process beside it."""
    script = folder / "spinning.py"
    script.write_text(SPINNING)
    paused, dumped = [], []
    py_spy = Path(sys.executable).with_name("py-spy")
    for _ in range(repeats):
        proc = start(script, stdin=True)
        try:
            time.sleep(0.3)  # its start over
            [outcome] = link_pids([proc.pid], agents_hub(hub))
            assert outcome.status == "linked", outcome.line
            wait_listed([proc.pid], lambda: listed_pids(hub), 30)
            started = time.perf_counter()
            answer = hub_api.pause(hub.client_address, [f"pid={proc.pid}"])
            assert answer["paused"], answer
            hub.wait_sessions(1, timeout=30)
            paused.append(time.perf_counter() - started)
            if py_spy.exists():
                started = time.perf_counter()
                subprocess.run([str(py_spy), "dump", "--pid", str(proc.pid)],
                               capture_output=True, timeout=30, check=True)
                dumped.append(time.perf_counter() - started)
        finally:
            stop(proc)
            hub.wait_sessions(0, timeout=30)
    return {"pause_seconds": summary(paused), "py_spy_seconds": summary(dumped)}


def debugpy_baseline(folder: Path, repeats: int) -> dict[str, Any]:
    """``debugpy --pid`` on a blocked process: wall time, and whether it survived."""
    script = folder / "blocked.py"
    script.write_text(BLOCKED)
    times, survived, said = [], 0, ""
    for _ in range(repeats):
        proc = start(script)
        try:
            started = time.perf_counter()
            done = subprocess.run([sys.executable, "-m", "debugpy", "--listen", "127.0.0.1:0",
                                   "--pid", str(proc.pid)], capture_output=True, text=True,
                                  timeout=60, check=False)
            times.append(time.perf_counter() - started)
            try:
                proc.wait(timeout=1)
            except subprocess.TimeoutExpired:
                survived += 1
            else:
                said = (done.stdout + done.stderr).strip().splitlines()[-1:]
        finally:
            stop(proc)
    return {"seconds": summary(times), "survived": survived, "repeats": repeats,
            "last_words": said}


def summary(values: list[float]) -> dict[str, float] | None:
    if not values:
        return None
    ordered = sorted(values)
    return {"median": statistics.median(ordered), "max": ordered[-1], "min": ordered[0],
            "n": len(ordered)}


def run(count: int = 20, repeats: int = 5) -> dict[str, Any]:
    folder = Path(tempfile.mkdtemp(prefix="raydebug-bench-link-"))
    hub = start_hub()
    try:
        return {"many": link_many(hub, folder, count), "gap": gaps(hub, folder, repeats),
                "busy": pause_busy(hub, folder, repeats),
                "debugpy": debugpy_baseline(folder, 3)}
    finally:
        hub.close()


def table(results: dict[str, Any]) -> str:
    many, gap, base = results["many"], results["gap"], results["debugpy"]
    each, alone = many["each"], many["alone"]
    busy, spy = results["busy"]["pause_seconds"], results["busy"]["py_spy_seconds"]
    lines = [("measure (raydebug link)", "raydebug", "debugpy --pid", "target"),
             (f"link {many['count']} processes, in parallel: total until listed",
              f"{many['total_seconds']:.2f} s ({many['listed']}/{many['count']} listed)", "",
              ""),
             ("  per process, in parallel (median / max)",
              f"{each['median']:.2f} / {each['max']:.2f} s" if each else "-", "", "<= 0.5 s"),
             ("  per process, one at a time (median / max)",
              f"{alone['median']:.3f} / {alone['max']:.3f} s" if alone else "-",
              f"{base['seconds']['median']:.2f} s, {base['survived']}/{base['repeats']} "
              "survived" if base["seconds"] else "-", ""),
             ("longest gap of a busy loop, over a link (median / max)",
              f"{gap['with_link_ms']['median']:.1f} / {gap['with_link_ms']['max']:.1f} ms",
              "", "<= 50 ms"),
             ("  same window, no link (the machine's noise)",
              f"{gap['without_ms']['median']:.1f} / {gap['without_ms']['max']:.1f} ms", "", ""),
             ("pause that busy process, linked: -> listed (median / max)",
              f"{busy['median']:.2f} / {busy['max']:.2f} s" if busy else "-",
              f"py-spy dump {spy['median']:.2f} s ({busy['median'] / spy['median']:.1f}x)"
              if busy and spy else "-", "<= 1 s")]
    widths = [max(len(row[i]) for row in lines) for i in range(4)]
    return "\n".join("  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True))
                     for row in lines)


if __name__ == "__main__":
    import json

    measured = run(int(sys.argv[1]) if len(sys.argv) > 1 else 20)
    print(table(measured))
    print(json.dumps(measured, indent=1))
