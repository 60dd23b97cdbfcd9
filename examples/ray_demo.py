"""The README's main job (`make demo`): a Ray job whose task, actor and failing task pause,
debugged in this terminal with `raydebug attach --follow`.

It starts a local Ray on loopback (no cluster needed) with raydebug enabled and post-mortem
on, submits the job, and waits for the cluster's hub (which Ray starts at the first pause).
With a terminal on stdin you get the debugger: `where`, `p shard`, `c`... on each session in
turn. Without one (CI, a pipe) it plays a short scripted tour instead: where, p, continue on
each session. It exits 0 when the job has completed with the expected results; everything it
started, it stops.

On a terminal the debugger runs as the terminal's foreground process group, alone: Ctrl-C
then reaches only the debugger (which cancels the line, or pauses the debuggee), never this
driver or the local Ray, as with any job a shell runs in the foreground.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time

# Keep the local Ray on loopback (it would otherwise bind the machine's address).
os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")

import ray

import raydebug
from raydebug.integrations import ray as ray_integration
from raydebug.shell_command import raydebug_command

SESSIONS = 3
TOUR = "where\np shard\nc\n" * SESSIONS
WAIT_TIMEOUT = 300  # seconds a session waits for a debugger, then continues by itself
JOB_TIMEOUT = WAIT_TIMEOUT + 60.0
LAST_WORDS = 2.0  # seconds the debugger has to finish its last session once the job is done


@ray.remote
def preprocess(shard: int) -> int:
    rows = [shard * 10 + i for i in range(4)]
    breakpoint()  # a task pauses: look at `rows`, then `c`
    return sum(rows)


@ray.remote(num_cpus=0)
class Trainer:
    def __init__(self) -> None:
        self.weight = 0.5

    def update(self, shard: int) -> float:
        gradient = shard * 0.1
        breakpoint()  # try `p self.weight`, `!gradient = 0`, `c`
        self.weight -= gradient
        return self.weight


@ray.remote(max_retries=0)
def validate(shard: int) -> float:
    expected = shard - 3
    return 100 / expected  # shard 3: ZeroDivisionError, frozen post-mortem


def start_ray() -> None:
    env = {"RAYDEBUG_POST_MORTEM": "1", "RAYDEBUG_WAIT_TIMEOUT": str(WAIT_TIMEOUT)}
    # address="local": a Ray of its own, even when another one runs on this machine.
    ray.init(address="local", num_cpus=4, include_dashboard=False, log_to_driver=False,
             _node_ip_address="127.0.0.1", runtime_env=raydebug.runtime_env({"env_vars": env}))


def start_attach(hub: str, interactive: bool) -> subprocess.Popen[str]:
    command = [sys.executable, "-m", "raydebug", "attach", "--follow", "--hub", hub]
    if interactive:
        # Its own process group, made the terminal's foreground one: Ctrl-C goes to it only.
        # (preexec_fn: Python 3.10 has no process_group.)
        attach = subprocess.Popen(command, text=True, preexec_fn=os.setpgrp)
        with contextlib.suppress(OSError):
            os.tcsetpgrp(sys.stdin.fileno(), attach.pid)
            # Had it read the terminal before it was the foreground, SIGTTIN stopped it.
            os.killpg(attach.pid, signal.SIGCONT)
        return attach
    attach = subprocess.Popen(command, stdin=subprocess.PIPE, text=True)
    assert attach.stdin is not None
    attach.stdin.write(TOUR)
    attach.stdin.close()
    return attach


def stop(attach: subprocess.Popen[str]) -> None:
    if attach.poll() is None:
        # The job is done, but the debugger may not have said so of its last session yet
        # (it learns a function returned within a second): let it, then it leaves quietly,
        # detached (SIGINT would be a Ctrl-C: "pausing..." while that session ended).
        with contextlib.suppress(subprocess.TimeoutExpired):
            attach.wait(timeout=LAST_WORDS)
        attach.send_signal(signal.SIGTERM)
        try:
            attach.wait(timeout=10)
        except subprocess.TimeoutExpired:
            attach.kill()
            attach.wait(timeout=10)
    take_back_terminal()


def take_back_terminal() -> None:
    """Make this driver the terminal's foreground process group again (after the debugger).

    From the background, tcsetpgrp() stops the caller with SIGTTOU unless it ignores it.
    """
    if not sys.stdin.isatty():
        return
    previous = signal.signal(signal.SIGTTOU, signal.SIG_IGN)
    try:
        with contextlib.suppress(OSError):
            os.tcsetpgrp(sys.stdin.fileno(), os.getpgrp())
    finally:
        signal.signal(signal.SIGTTOU, previous)


def main() -> int:
    interactive = sys.stdin.isatty()
    print("starting a local Ray with raydebug enabled...", flush=True)
    start_ray()
    attach = None
    try:
        trainer = Trainer.remote()  # type: ignore[attr-defined]
        refs = [preprocess.remote(1), trainer.update.remote(2), validate.remote(3)]
        hub = ray_integration.wait_hub_info(JOB_TIMEOUT)
        if hub is None:
            print("the cluster's hub did not start", file=sys.stderr)
            return 1
        print(f"job submitted; {SESSIONS} sessions will pause. The hub: {hub.client}\n"
              + ("Debug each one (help lists commands; c moves on to the next).\n"
                 if interactive else "No terminal on stdin: a scripted tour.\n")
              + f"A session nobody attaches to continues by itself after {WAIT_TIMEOUT} s.\n",
              flush=True)
        attach = start_attach(hub.client, interactive)
        results = wait_for_job(refs, attach, hub.client)
    finally:
        if attach is not None:
            stop(attach)
        ray.shutdown()
    print(f"\njob complete: preprocess -> {results[0]}, Trainer.update -> {results[1]}, "
          f"validate -> {results[2]}")
    ok = results[0] == 46 and isinstance(results[1], float) and "ZeroDivisionError" in results[2]
    print("demo complete" if ok else "demo failed: unexpected results")
    return 0 if ok else 1


def wait_for_job(refs: list[ray.ObjectRef], attach: subprocess.Popen[str],
                 hub: str) -> list[object]:
    """The job's results (the failing task's as its error's text), waiting at most
    JOB_TIMEOUT; says how to come back if the debugger is left early."""
    started = time.monotonic()
    deadline = started + JOB_TIMEOUT
    told = told_timeout = False
    while True:
        ready, _ = ray.wait(refs, num_returns=len(refs), timeout=1.0)
        if len(ready) == len(refs):
            break
        if attach.poll() is not None and not told:
            take_back_terminal()
            print(f"the debugger has left; the job goes on when its paused sessions are "
                  f"continued: {raydebug_command()} attach --follow --hub {hub}", flush=True)
            told = True
        if time.monotonic() - started > WAIT_TIMEOUT and not told_timeout:
            print(f"the sessions nobody visited waited {WAIT_TIMEOUT} s for a debugger and "
                  "continued by themselves (RAYDEBUG_WAIT_TIMEOUT)", flush=True)
            told_timeout = True
        if time.monotonic() > deadline:
            raise TimeoutError("the job did not complete")
    results: list[object] = []
    for ref in refs:
        try:
            results.append(ray.get(ref))
        except ray.exceptions.RayTaskError as error:
            results.append(str(error).strip().splitlines()[-1])
    return results


if __name__ == "__main__":
    sys.exit(main())
