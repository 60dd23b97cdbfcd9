"""`raydebug continue SELECTOR` against a real hub and four real linked processes: ranks 0
and 1 wait in `breakpoint()` (no debugger has come: the agent's wait), rank 2 was stopped by
`raydebug pause` (suspended in pydevd), rank 3 is debugged by a DAP client. One command lets
the first three run on and leaves the fourth to its client, saying so."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
from pathlib import Path

import pexpect
import pytest

from helpers import TIMEOUT, HubProcess, finish, raydebug, run, start_hub, write_script

pytestmark = pytest.mark.integration

RANKED = """
import os, time

def step(rank):
    breakpoint()
    return rank

if os.environ["RANK"] == "2":
    while True:  # paused by raydebug pause
        time.sleep(0.01)
print("ran on", step(int(os.environ["RANK"])), flush=True)
"""


def test_continue_resumes_every_matching_session_and_leaves_an_attached_one(tmp_path: Path):
    with start_hub() as hub:
        script = write_script(tmp_path, "ranked.py", RANKED)
        procs = [hub.spawn(script, RAYDEBUG_LIVE="1", RANK=str(rank)) for rank in range(4)]
        hub.wait_linked(4)
        hub.wait_sessions(3)
        paused = raydebug(hub, "pause", "rank=2")
        assert paused.returncode == 0, paused.stderr
        sessions = {s["labels"]["RANK"]: s for s in hub.wait_sessions(4)}

        async def continue_while_rank_3_is_attached() -> tuple[str, str, int]:
            client = await hub.dap()
            await client.attach(sessions["3"]["id"])
            done = await asyncio.to_thread(raydebug, hub, "continue", "rank=0-3")
            await client.request("disconnect", {})
            await client.close()
            return done.stdout, done.stderr, done.returncode

        out, err, code = run(continue_while_rank_3_is_attached())

        assert code == 0, err
        lines = out.splitlines()
        assert lines[-1] == "continued 3 sessions in 3 processes; 1 not", out
        assert sorted(lines[:-1]) == sorted(
            f"continued {sessions[r]['id']}  rank {r}  pid {procs[int(r)].pid}  "
            f"{sessions[r]['function']} at …/ranked.py"
            f":{sessions[r]['line']}" for r in "012"), out
        assert err == (f"raydebug: not continued {sessions['3']['id']}  rank 3  "
                       f"pid {procs[3].pid}  step at …/ranked.py:{sessions['3']['line']}: a "
                       "client is attached to its process (continue it there)\n"), err
        for rank in (0, 1, 3):  # rank 3: its client's disconnect let it go
            code, out, err = finish(procs[rank])
            assert (code, out) == (0, f"ran on {rank}\n"), err
        hub.wait_processes("rank 2 runs on", lambda ps: [
            p for p in ps if p["pid"] == procs[2].pid and p["state"] == "running"])

        running = raydebug(hub, "continue", "rank=2")
        assert running.returncode == 1 and running.stdout == ""
        assert "no paused session in the processes matching rank=2" in running.stderr
        # after the hub's '(found by ...)', a second parenthesis read as noise
        assert running.stderr.endswith(": they run\n"), running.stderr
        nothing = raydebug(hub, "continue", "rank=9")
        assert nothing.returncode == 1 and nothing.stdout == ""
        said = nothing.stderr.splitlines()
        assert said[0].startswith("raydebug: no process matches rank=9 on the hub at"), said
        # then what there is, one process a line, as pause and stacks say it
        assert len(said) > 1 and all(line.startswith("  ") for line in said[1:]), said


BLOCKED = """
import threading

done = threading.Event()

def wait():  # the user's code, blocked in C (a thread running only library code is let go)
    done.wait()

threading.Thread(target=wait, name="blocked", daemon=True).start()
print("waits", flush=True)
done.wait()
"""


def paused_blocked(hub: HubProcess, tmp_path: Path) -> subprocess.Popen[str]:
    """A linked process of two threads blocked in C, paused: its two sessions listed."""
    proc = hub.spawn(write_script(tmp_path, "blocked.py", BLOCKED), RAYDEBUG_LIVE="1")
    hub.wait_linked(1)
    paused = raydebug(hub, "pause", f"pid={proc.pid}")
    assert paused.returncode == 0, paused.stderr
    hub.wait_sessions(2)
    return proc


def test_a_process_paused_and_continued_with_no_client_still_exits(tmp_path: Path):
    """Both threads blocked in C when `raydebug pause` comes, continued by `raydebug
    continue` (no client ever came): Ctrl-C then ends the process as without raydebug (it
    hung in threading._shutdown, waiting for pydevd's CheckAliveThread)."""
    with start_hub() as hub:
        proc = paused_blocked(hub, tmp_path)
        done = raydebug(hub, "continue", f"pid={proc.pid}")
        assert done.returncode == 0, done.stderr
        proc.send_signal(signal.SIGINT)
        code, out, err = finish(proc, timeout=10)
        assert (code, out) == (-signal.SIGINT, "waits\n"), err
        assert err.endswith("KeyboardInterrupt\n"), err


def test_continue_in_a_60_column_terminal_keeps_each_line_on_one(tmp_path: Path):
    """Found by use: at 60 columns each `continued ...` line (a place cut to 40 characters
    after the id, the pid and the task) was wrapped by the terminal mid-path."""
    with start_hub() as hub:
        proc = paused_blocked(hub, tmp_path)
        env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES")}
        shell = pexpect.spawn(sys.executable, ["-m", "raydebug", "continue", f"pid={proc.pid}",
                                               "--hub", hub.client_address],
                              env={**env, "NO_COLOR": "1"}, encoding="utf-8",
                              timeout=TIMEOUT, dimensions=(24, 60))
        shell.expect(pexpect.EOF)
        shell.close()
        lines = shell.before.replace("\r\n", "\n").splitlines()
        assert shell.exitstatus == 0 and lines[-1] == "continued 2 sessions in 1 process", lines
        assert all(len(line) <= 60 and ".py:" in line for line in lines[:-1]), lines
        proc.send_signal(signal.SIGINT)
        finish(proc, timeout=10)
