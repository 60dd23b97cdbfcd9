"""A pause request has an owner and an end: `raydebug pause --wait S` withdraws what has not
stopped within S (unless --keep), `raydebug pause --cancel` withdraws what is pending, `ps`
shows `pause requested` meanwhile, and a withdrawn pause never stops the thread later: it
returns to Python and runs on, untraced. A kept one that finally stops says so on stderr.

The process's main thread waits in C on stdin, and raydebug's signal is ignored (the program
took it), so nothing can bring it to Python but the test's next line: its pause is met only
when the thread is served where it waits, blocked in C (``blocked_threads.MAIN_GRACE`` after
the ask). A shorter ``--wait`` withdraws it before; ``--cancel`` lets it go either way.
Real processes, a real hub, the real CLI."""

from __future__ import annotations

import os
import selectors
import subprocess
import sys
import time
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
from raydebug.agent.debugger.blocked_threads import MAIN_GRACE

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


def runs_on_untraced(hub: HubProcess, proc: subprocess.Popen[str], served: bool = False) -> None:
    """Unblock the main thread: it must run to its end, stopping nowhere, untraced.
    ``served``: it was a session blocked in C, let go (its notice was said, no other)."""
    assert proc.stdin is not None
    proc.stdin.write("go\n")
    proc.stdin.flush()
    code, out, err = finish(proc)
    assert code == 0, err[-2000:]
    assert out.splitlines()[-2:] == ["read go", "untraced True"], out
    assert err.count("paused at") == (1 if served else 0), err
    assert "its call returned" not in err, err
    assert hub.get("/api/sessions") == []


def stderr_until(proc: subprocess.Popen[str], text: str) -> str:
    """``proc``'s stderr until it contains ``text`` (waiting at most TIMEOUT), read from
    the pipe itself: :func:`finish` reads the rest."""
    assert proc.stderr is not None
    seen = b""
    deadline = time.monotonic() + TIMEOUT
    with selectors.DefaultSelector() as selector:
        selector.register(proc.stderr, selectors.EVENT_READ)
        while text.encode() not in seen:
            assert selector.select(deadline - time.monotonic()), f"no {text!r}: {seen!r}"
            chunk = os.read(proc.stderr.fileno(), 65536)
            assert chunk, f"stderr ended without {text!r}: {seen!r}"
            seen += chunk
    return seen.decode()


def test_a_pause_not_met_within_wait_is_withdrawn(hub: HubProcess, tmp_path: Path):
    proc = blocked_process(hub, tmp_path)
    # Withdrawn before the main thread would be served where it waits.
    said = raydebug(hub, "pause", f"pid={proc.pid}", "--wait", f"{MAIN_GRACE / 3:.2f}")
    assert "no thread stopped in time, the pause is withdrawn" in said, said
    pending(hub, proc.pid, False)
    runs_on_untraced(hub, proc)


def test_a_kept_pause_is_listed_then_cancelled(hub: HubProcess, tmp_path: Path):
    proc = blocked_process(hub, tmp_path)
    said = raydebug(hub, "pause", f"pid={proc.pid}", "--wait", "0.5", "--keep")
    # Asked, then served blocked in C: pending either way until the call returns.
    pending(hub, proc.pid, True)
    (session,) = hub.wait_sessions(1)
    assert session["blocked_in_c"] is True, session
    assert session["id"] in raydebug(hub, "ps")  # paused, by its session blocked in C
    said = raydebug(hub, "pause", "--cancel", f"pid={proc.pid}")
    assert "withdrew the pause of 1 thread" in said, said
    pending(hub, proc.pid, False)
    hub.wait_sessions(0)  # let go: its session ends
    assert "pause requested" not in raydebug(hub, "ps")
    runs_on_untraced(hub, proc, served=True)


def test_a_kept_pause_that_stops_later_says_so(hub: HubProcess, tmp_path: Path):
    proc = blocked_process(hub, tmp_path)
    raydebug(hub, "pause", f"pid={proc.pid}", "--wait", "0.5", "--keep")
    pending(hub, proc.pid, True)
    (blocked,) = hub.wait_sessions(1)  # served where it waits, meanwhile
    assert proc.stdin is not None
    proc.stdin.write("go\n")
    proc.stdin.flush()
    said = stderr_until(proc, "its call returned")
    # The process says so on stderr at once; the hub hears of it from its link a moment
    # later, which changes the hub's registry: wait on that.
    [session] = hub.wait_listing("/api/sessions", "the hub hears the call returned",
                                 lambda listed: [s for s in listed if not s["blocked_in_c"]])
    assert session["id"] == blocked["id"], session
    assert session["line"] == line_of(Path(session["file"]), 'print("read"')
    pending(hub, proc.pid, False)
    seen = run(evaluate_and_continue(*hub.client, session["id"], "waited"))
    assert seen.result == "'on stdin'"
    code, out, err = finish(proc)
    err = said + err
    assert code == 0, err[-2000:]
    assert "read go" in out
    assert f"session {session['id']} paused at " in err and "by raydebug pause" in err, err


SPINS = """
import sys, time
input()  # the test says when the process is linked
print("ready", flush=True)
while not sys.stdin.readline():  # the test's line ends it; a pause stops it here at once
    time.sleep(0.01)
print("done", flush=True)
"""


def test_a_pause_a_process_could_not_answer_does_not_stop_it_later(
        hub: HubProcess, tmp_path: Path) -> None:
    """Found by use: `raydebug pause` of a process that does not answer (stopped here, as
    one whose GIL C code holds for long) says it could not pause it; the request waited in
    its connection, and once it ran again it paused, a session nobody would attach to,
    waiting for ever. It is withdrawn now, and said so; with --keep (the second process,
    asked at the same time: the hub waits 10 s for each) it stays asked, said so too, and
    stops the process when it runs again."""
    import signal
    from concurrent.futures import ThreadPoolExecutor

    from raydebug.client.hub_api import pause

    procs = [hub.spawn_linked(write_script(tmp_path, f"spins{n}.py", SPINS)) for n in range(2)]
    kept = procs[1]  # the first one's pause is withdrawn
    for proc in procs:
        assert read_line(proc).strip() == "ready"
        os.kill(proc.pid, signal.SIGSTOP)
    try:
        with ThreadPoolExecutor(2) as asking:
            answers = list(asking.map(
                lambda proc, expire: pause(hub.client_address, [f"pid={proc.pid}"],
                                           expire=expire, timeout=30), procs, [5, 0]))
    finally:
        for proc in procs:
            os.kill(proc.pid, signal.SIGCONT)
    (said_withdrawn,), (said_kept,) = (answer["failed"].values() for answer in answers)
    assert said_withdrawn == ("no answer within 10s (is its GIL held by C code?); withdrawn: "
                              "it will not pause when it runs again"), said_withdrawn
    assert said_kept == ("no answer within 10s (is its GIL held by C code?); still asked "
                         "(--keep): it pauses when it runs Python again (`raydebug pause "
                         "--cancel` withdraws)"), said_kept
    # Running again, each reads its pause (and the first its withdrawal) at once: only the
    # kept one stops, the other does not, not within the main thread's grace either.
    (session,) = hub.wait_sessions(1)
    assert session["pid"] == kept.pid and session["reason"] == "pause", session
    assert hub.get(f"/api/sessions?min=2&timeout={MAIN_GRACE + 1}") == [session]
    raydebug(hub, "continue", f"pid={kept.pid}")
    for proc in procs:
        assert proc.stdin is not None
        proc.stdin.write("end\n")
        proc.stdin.flush()
        code, out, err = finish(proc)
        assert code == 0 and out.strip().endswith("done"), (out, err)
