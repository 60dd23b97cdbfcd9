"""`raydebug link pid=N`: a plain process, started with no raydebug variable at all, its main
thread blocked in ``Event.wait()`` and a second thread busy in Python, becomes a live
process: `ps` lists it, `stacks` shows both threads, `pause` and a DAP client evaluate
``os.getpid()`` in it, and it runs on afterwards. Linking it again is a no-op. Refusals: a
dead pid, a process that cannot import raydebug, one of another user linked by an
unprivileged user: one line each, exit status 1. Real hub, real ptrace, on 3.10 to 3.13."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from devtools.other_user import OTHER_UID, copy_packages, python_for_user, run_as
from devtools.pythons import SOURCE, find_python, python_for
from helpers import (
    TIMEOUT,
    HubProcess,
    evaluate_and_continue,
    raydebug,
    read_line,
    run,
    start_hub,
    stop,
    write_script,
)
from raydebug.client.hub_api import pause

pytestmark = pytest.mark.integration

PLAIN = """
import os, threading
count = 0

def spin():
    global count
    while True:
        count += 1  # busy in Python

threading.Thread(target=spin, name="spinner", daemon=True).start()
print("ready", flush=True)
threading.Event().wait()  # blocked in C
"""


@pytest.fixture(scope="module")
def hub() -> Iterator[HubProcess]:
    process = start_hub()
    try:
        yield process
    finally:
        process.close()


@pytest.fixture(scope="module")
def packages() -> Iterator[Path]:
    """raydebug and what it requires, where uid 1000 reads them (a fresh clone under
    ``mktemp -d`` is not)."""
    root = copy_packages()
    try:
        yield root
    finally:
        shutil.rmtree(root, ignore_errors=True)


def uid_1000_python(packages: Path, *modules: str) -> str:
    """An interpreter uid 1000 runs that imports ``modules`` from ``packages``; skips the
    test where there is none."""
    try:
        return python_for_user(OTHER_UID, OTHER_UID, packages, *modules)
    except LookupError as tried:
        pytest.skip(f"uid 1000 can run no Python that imports raydebug ({tried})")


def plain_env(**extra: str) -> dict[str, str]:
    """This environment without a single raydebug variable (nor a breakpoint hook)."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("RAYDEBUG") and k != "PYTHONBREAKPOINT"}
    return {**env, **extra}


def start_plain(hub: HubProcess, script: Path, python: str, **env: str
                ) -> subprocess.Popen[str]:
    proc = subprocess.Popen([python, str(script)], env=plain_env(**env),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    hub.workers.append(proc)  # stopped with the hub
    assert read_line(proc).strip() == "ready"
    return proc


@pytest.mark.parametrize("version", ["3.10", "3.11", "3.12", "3.13"])
def test_a_plain_process_linked_by_pid_is_live(hub: HubProcess, tmp_path: Path,
                                              version: str) -> None:
    script = write_script(tmp_path, "plain.py", PLAIN)
    proc = start_plain(hub, script, python_for(version), PYTHONPATH=str(SOURCE))

    done = raydebug(hub, "link", f"pid={proc.pid}")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == f"linked pid {proc.pid}", done.stdout

    listed = raydebug(hub, "ps", f"pid={proc.pid}")
    assert listed.returncode == 0 and str(proc.pid) in listed.stdout, listed
    stacks = json.loads(raydebug(hub, "stacks", "--json", f"pid={proc.pid}").stdout)
    [process] = stacks["processes"]
    functions = {thread["name"]: [f["function"] for f in thread["frames"]]
                 for thread in process["threads"]}
    assert "spin" in functions["spinner"], functions
    assert functions["MainThread"][-1] == "wait", functions  # Event.wait(): where it blocks

    again = raydebug(hub, "link", f"pid={proc.pid}")
    assert again.returncode == 0 and "linked already" in again.stdout, again

    answer = pause(hub.client_address, [f"pid={proc.pid}"])
    assert answer["paused"], answer
    sessions = hub.wait_sessions(2)  # both threads: the main one brought back from C
    main = next(s for s in sessions if s["thread"] == "MainThread")
    seen = run(evaluate_and_continue(*hub.client, main["id"], "os.getpid()"))
    assert seen.result == str(proc.pid)
    hub.wait_sessions(0)  # every thread runs on

    after = json.loads(raydebug(hub, "stacks", "--json", f"pid={proc.pid}").stdout)
    assert after["processes"][0]["answered"] and proc.poll() is None
    stop(proc)
    hub.wait_processes(f"pid {proc.pid} gone", lambda ps: all(p["pid"] != proc.pid for p in ps))


def test_refusals_are_one_line_each(hub: HubProcess, tmp_path: Path) -> None:
    script = write_script(tmp_path, "plain.py", PLAIN)
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait(timeout=TIMEOUT)
    gone = raydebug(hub, "link", f"pid={dead.pid}")
    assert gone.returncode == 1 and gone.stderr.strip() == (
        f"raydebug: pid {dead.pid}: no such process"), gone.stderr

    base = find_python("3.10")
    if base is None:
        pytest.skip("no Python 3.10 here")
    bare = start_plain(hub, script, str(base))  # pyenv's own: no raydebug, no PYTHONPATH
    refused = raydebug(hub, "link", f"pid={bare.pid}")
    assert refused.returncode == 1, refused
    [line] = refused.stderr.splitlines()
    assert f"pid {bare.pid}: raydebug cannot be imported in it (Python 3.10" in line, line
    assert bare.poll() is None  # untouched, running on


def test_a_spinning_single_thread_is_left_alone_and_an_exit_midway_is_said(
        hub: HubProcess, tmp_path: Path) -> None:
    # Its one thread always runs Python: no safe place to call into it, so it is not touched.
    spinning = start_plain(hub, write_script(tmp_path, "spin.py", """
        print("ready", flush=True)
        while True:
            pass
        """), sys.executable, PYTHONPATH=str(SOURCE))
    refused = raydebug(hub, "link", f"pid={spinning.pid}")
    assert refused.returncode == 1, refused
    assert refused.stderr.strip() == (
        f"raydebug: pid {spinning.pid}: none of its threads waits in a system call now (its "
        "main thread runs Python, and no other thread waits in C): try again, or start it "
        "under `raydebug run` next time"), refused.stderr
    assert spinning.poll() is None

    # A process that ends while being linked: its raydebug (on its own path) exits at import.
    exiting = tmp_path / "exits" / "raydebug" / "linking"
    exiting.mkdir(parents=True)
    (exiting.parent / "__init__.py").write_text("")
    (exiting / "__init__.py").write_text("")
    (exiting / "inside.py").write_text("import os\nos._exit(3)\n")
    ends = start_plain(hub, write_script(tmp_path, "plain.py", PLAIN), sys.executable,
                       PYTHONPATH=str(exiting.parent.parent))
    said = raydebug(hub, "link", f"pid={ends.pid}")
    assert said.returncode == 1, said
    assert said.stderr.strip() == f"raydebug: pid {ends.pid}: it exited while being linked"
    assert ends.wait(timeout=TIMEOUT) == 3


def gdb_calls_into_processes() -> str | None:
    """Why gdb cannot be the way in here (None: it can): not installed, or it cannot call a
    function in a process (gdb 13 on a CPU whose extended state it cannot write, AMX: the
    target dies), tried on a throwaway process."""
    if shutil.which("gdb") is None:
        return "needs gdb (apt-get install gdb; .ci/run installs it)"
    throwaway = subprocess.Popen(["sleep", "60"])
    try:
        tried = subprocess.run(["gdb", "--nx", "--batch", "--pid", str(throwaway.pid),
                                "--eval-command=call (int)getpid()"], capture_output=True,
                               text=True, timeout=TIMEOUT, check=False)
    finally:
        throwaway.kill()
        throwaway.wait(timeout=TIMEOUT)
    if f"= {throwaway.pid}" not in tried.stdout:
        return f"gdb cannot call into a process here: {(tried.stderr or tried.stdout)[-200:]!r}"
    return None


def test_the_gdb_way_in_links_a_plain_process_too(hub: HubProcess, tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """RAYDEBUG_LINK_WITH=gdb: debugpy's attach library loaded and called through gdb, as
    ``debugpy --pid`` does; said in one line, quietly (gdb's warnings are not failures)."""
    if (why := gdb_calls_into_processes()) is not None:
        pytest.skip(why)
    script = write_script(tmp_path, "plain.py", PLAIN)
    proc = start_plain(hub, script, sys.executable, PYTHONPATH=str(SOURCE))
    monkeypatch.setenv("RAYDEBUG_LINK_WITH", "gdb")
    done = raydebug(hub, "link", f"pid={proc.pid}")
    assert (done.returncode, done.stdout.strip(), done.stderr) == (
        0, f"linked pid {proc.pid}", ""), done
    [record] = hub.wait_processes(f"pid {proc.pid} listed", lambda ps: [
        p for p in ps if p["pid"] == proc.pid])
    assert record["live"], record
    assert proc.poll() is None


def test_another_users_process_is_refused_to_an_unprivileged_user(
        hub: HubProcess, tmp_path: Path, packages: Path) -> None:
    if os.geteuid() != 0:
        pytest.skip("needs root, to run the linker as another user")
    script = write_script(tmp_path, "plain.py", PLAIN)
    proc = start_plain(hub, script, sys.executable, PYTHONPATH=str(SOURCE))
    python = uid_1000_python(packages, "raydebug.cli.group", "raydebug.linking.local")
    refused = subprocess.run(
        [*run_as(OTHER_UID, OTHER_UID), python, "-m", "raydebug", "link", f"pid={proc.pid}",
         "--hub", hub.client_address],
        env=plain_env(PYTHONPATH=str(packages), RAYDEBUG_HUB=hub.agent_address,
                      RAYDEBUG_TOKEN=hub.token, NO_COLOR="1"),
        capture_output=True, text=True, timeout=TIMEOUT, check=False)
    assert refused.returncode == 1, refused
    [line] = refused.stderr.splitlines()
    assert line.startswith(f"raydebug: pid {proc.pid}: no ptrace rights over it (it runs as "
                           "uid 0, you as uid 1000)"), line
    assert proc.poll() is None


def test_root_links_another_users_process(hub: HubProcess, packages: Path) -> None:
    """The ticket is handed to the target's user (its directory chowned to it), never
    readable by others; the process links to root's hub with the token in it."""
    if os.geteuid() != 0:
        pytest.skip("needs root")
    python = uid_1000_python(packages, "raydebug.linking.inside", "raydebug.agent")
    readable = Path(tempfile.mkdtemp(prefix="raydebug-test-link-"))  # pytest's are 0700
    readable.chmod(0o755)
    script = write_script(readable, "plain.py", PLAIN)
    script.chmod(0o644)
    proc = subprocess.Popen([*run_as(OTHER_UID, OTHER_UID), python, str(script)],
                            env=plain_env(PYTHONPATH=str(packages)), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    hub.workers.append(proc)
    assert read_line(proc).strip() == "ready", proc.stderr and proc.stderr.read()
    done = raydebug(hub, "link", f"pid={proc.pid}")
    assert done.returncode == 0, done.stderr
    [record] = hub.wait_processes(f"pid {proc.pid} listed", lambda ps: [
        p for p in ps if p["pid"] == proc.pid])
    assert record["live"], record
    left = [d for d in Path(tempfile.gettempdir()).glob("raydebug-link-*")
            if d.stat().st_uid == 1000]
    assert not left, f"tickets left behind: {left}"
    shutil.rmtree(readable)


GIL_HOLDER = """
import re, sys, threading

def hold_the_gil():
    sys.stdin.readline()
    re.match(r"(a+)+$", "a" * 25 + "b")  # ~1 s in C (more under load), the GIL held
    print("let go", flush=True)

threading.Thread(target=hold_the_gil).start()
print("ready", flush=True)
threading.Event().wait()
"""

# The main thread itself waits for the GIL while the regex holds it: the thread the call
# would go to is inside the GIL's own wait (calling into it there hung the process).
WAITING_FOR_THE_GIL = """
import re, sys, threading

def hold_the_gil():
    re.match(r"(a+)+$", "a" * 25 + "b")  # ~1 s in C (more under load), the GIL held
    print("let go", flush=True)

print("ready", flush=True)
sys.stdin.readline()
threading.Thread(target=hold_the_gil).start()
while threading.active_count() > 1:
    pass  # wants the GIL back every 5 ms: waits for it while the regex runs
threading.Event().wait()
"""


@pytest.mark.parametrize("holder", [GIL_HOLDER, WAITING_FOR_THE_GIL],
                         ids=["main-thread-in-a-lock", "main-thread-waiting-for-the-gil"])
def test_a_gil_held_in_c_delays_the_link_without_harm(hub: HubProcess, tmp_path: Path,
                                                       holder: str) -> None:
    """The call into the process waits for the GIL and cannot be taken back: past --timeout
    the command says why and exits 1, its helper finishes the link once the GIL is free,
    and the process lives on (an abandoned call would have killed it; a call into a thread
    waiting for the GIL itself would have hung it)."""
    script = write_script(tmp_path, "holder.py", holder)
    proc = subprocess.Popen([sys.executable, str(script)],
                            env=plain_env(PYTHONPATH=str(SOURCE)), stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    hub.workers.append(proc)
    assert read_line(proc).strip() == "ready"
    assert proc.stdin is not None
    proc.stdin.write("go\n")
    proc.stdin.flush()
    late = raydebug(hub, "link", "--timeout", "0.3", f"pid={proc.pid}")
    assert late.returncode == 1 and len(late.stderr.splitlines()) == 1, late
    [line] = late.stderr.splitlines()
    assert line.startswith(f"raydebug: pid {proc.pid}: a thread of it holds the GIL in C (no "
                           "answer within 0.3 s): the link finishes when it lets go"), line
    assert read_line(proc, timeout=120).strip() == "let go"
    hub.wait_processes(f"pid {proc.pid} linked", lambda ps: [
        p for p in ps if p["pid"] == proc.pid and p["live"]])
    assert proc.poll() is None
    stop(proc)
