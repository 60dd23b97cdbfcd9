"""A pause request has an owner and an end: `raydebug pause --wait S` withdraws what has not
stopped within S (unless --keep), `raydebug pause --cancel` withdraws what is pending, `ps`
shows `pause requested` meanwhile, and a withdrawn pause never stops the thread later: it
returns to Python and runs on, untraced. A kept one that finally stops says so on stderr.

The process's main thread waits in C on stdin, and raydebug's signal is ignored (the program
took it), so nothing can bring it to Python but the test's next line.
Real processes, a real hub, the real CLI."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from helpers import (
    TIMEOUT,
    HubProcess,
    evaluate_and_continue,
    finish,
    line_of,
    read_line,
    run,
    write_script,
)

pytestmark = pytest.mark.integration

SCRIPT = """
import signal, sys
from raydebug.agent import get_agent, pause_signal

# As a program that takes every signal for itself: raydebug's cannot interrupt the main thread.
signal.signal(pause_signal.installed(), signal.SIG_IGN)

def main():
    waited = "on stdin"
    input()  # the test says when the process is linked
    print("ready", flush=True)
    line = sys.stdin.readline()  # blocked here
    print("read", line.strip(), flush=True)

main()
print("untraced", get_agent().debugger.wait_untraced(10), flush=True)
"""


def raydebug(hub: HubProcess, *args: str) -> str:
    """Run the raydebug CLI against ``hub``; its stdout (it must succeed)."""
    done = subprocess.run([sys.executable, "-m", "raydebug", *args, "--hub",
                           hub.client_address], capture_output=True, text=True,
                          timeout=TIMEOUT)
    assert done.returncode == 0, done.stderr
    return done.stdout


def blocked_process(hub: HubProcess, tmp_path: Path) -> subprocess.Popen[str]:
    proc = hub.spawn_linked(write_script(tmp_path, "stdin_job.py", SCRIPT))
    assert read_line(proc).strip() == "ready"
    return proc


def pending(hub: HubProcess, pid: int, wanted: bool) -> None:
    """Wait until the hub says that ``pid`` has a pause requested (or none)."""
    hub.wait_processes(f"pid {pid} with{'' if wanted else 'out'} a pause requested",
                       lambda ps: [p for p in ps if p["pid"] == pid
                                   and bool(p.get("pause_requested")) is wanted])


def runs_on_untraced(hub: HubProcess, proc: subprocess.Popen[str]) -> None:
    """Unblock the main thread: it must run to its end, stopping nowhere, untraced."""
    assert proc.stdin is not None
    proc.stdin.write("go\n")
    proc.stdin.flush()
    code, out, err = finish(proc)
    assert code == 0, err[-2000:]
    assert out.splitlines()[-2:] == ["read go", "untraced True"], out
    assert "paused at" not in err, err
    assert hub.get("/api/sessions") == []


def test_a_pause_not_met_within_wait_is_withdrawn(hub: HubProcess, tmp_path: Path):
    proc = blocked_process(hub, tmp_path)
    said = raydebug(hub, "pause", f"pid={proc.pid}", "--wait", "1")
    assert "no thread stopped in time, the pause is withdrawn" in said, said
    pending(hub, proc.pid, False)
    runs_on_untraced(hub, proc)


def test_a_kept_pause_is_listed_then_cancelled(hub: HubProcess, tmp_path: Path):
    proc = blocked_process(hub, tmp_path)
    said = raydebug(hub, "pause", f"pid={proc.pid}", "--wait", "0.5", "--keep")
    assert f"raydebug pause --cancel pid={proc.pid}" in said, said
    pending(hub, proc.pid, True)
    assert "pause requested" in raydebug(hub, "ps")
    said = raydebug(hub, "pause", "--cancel", f"pid={proc.pid}")
    assert "withdrew the pause of 1 thread" in said, said
    pending(hub, proc.pid, False)
    assert "pause requested" not in raydebug(hub, "ps")
    runs_on_untraced(hub, proc)


def test_a_kept_pause_that_stops_later_says_so(hub: HubProcess, tmp_path: Path):
    proc = blocked_process(hub, tmp_path)
    raydebug(hub, "pause", f"pid={proc.pid}", "--wait", "0.5", "--keep")
    pending(hub, proc.pid, True)
    assert proc.stdin is not None
    proc.stdin.write("go\n")
    proc.stdin.flush()
    [session] = hub.wait_sessions(1)
    assert session["line"] == line_of(Path(session["file"]), 'print("read"')
    pending(hub, proc.pid, False)
    seen = run(evaluate_and_continue(*hub.client, session["id"], "waited"))
    assert seen.result == "'on stdin'"
    code, out, err = finish(proc)
    assert code == 0, err[-2000:]
    assert "read go" in out
    assert f"session {session['id']} paused at " in err and "by raydebug pause" in err, err
