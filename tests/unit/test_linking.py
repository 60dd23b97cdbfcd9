"""`raydebug link`'s decisions, in memory: which targets are refused and in which words,
what the bootstrap's answer means, how gdb's output is read, where Python's functions are."""

from __future__ import annotations

import ctypes
import sys
from pathlib import Path

import pytest

from raydebug.linking import local
from raydebug.linking.inject import gdb_command, gdb_problem
from raydebug.linking.local import _outcome
from raydebug.linking.ptrace_call import find_symbols, mapped_files, python_functions
from raydebug.linking.target import (
    Linker,
    Target,
    disables_remote_debug,
    parse_version,
    refusal,
    runs,
    uses_remote_exec,
)

ROOT = Linker(uid=0, can_ptrace_others=True, has_gdb=True, has_remote_exec=False)
USER = Linker(uid=1000, can_ptrace_others=False, has_gdb=True, has_remote_exec=False)
PLAIN = Target(4242, (1000, 1000, 1000), "/usr/bin/python3.11", (3, 11, 7))


def test_a_python_of_the_same_user_or_of_anyone_for_root_is_tried():
    assert refusal(PLAIN, USER) is None
    assert refusal(PLAIN, ROOT) is None


@pytest.mark.parametrize(("target", "linker", "says"), [
    (Target(4242), USER, "pid 4242: no such process"),
    (Target(4242, (0, 0, 0), "/usr/bin/python3.11", (3, 11, 7)), USER,
     "pid 4242: no ptrace rights over it (it runs as uid 0, you as uid 1000)"),
    (Target(4242, (1000, 1000, 1000), "/usr/bin/bash"), USER,
     "pid 4242: not a Python process (/usr/bin/bash)"),
    (Target(4242, (1000,) * 3, "/usr/bin/python3.8", (3, 8, 10)), USER,
     "pid 4242: Python 3.8.10 (/usr/bin/python3.8); raydebug needs Python 3.10 or later"),
    (Target(4242, (1000,) * 3, "/usr/bin/python3.14", (3, 14, 0), True), USER,
     "pid 4242: remote debugging is disabled in it (PYTHON_DISABLE_REMOTE_DEBUG"),
])
def test_refusals_say_why_in_one_line(target: Target, linker: Linker, says: str):
    why = refusal(target, linker)
    assert why is not None and why.startswith(says) and "\n" not in why, why


def test_gdb_is_needed_only_when_it_is_the_way_in():
    no_gdb = Linker(uid=1000, can_ptrace_others=False, has_gdb=False, has_remote_exec=False)
    assert refusal(PLAIN, no_gdb, injector="ptrace") is None
    why = refusal(PLAIN, no_gdb, injector="gdb")
    assert why is not None and "apt-get install gdb" in why


def test_remote_exec_serves_314_targets_from_a_314_linker_only():
    new = Target(1, (0,) * 3, "/usr/bin/python3.14", (3, 14, 0))
    with_it = Linker(uid=0, can_ptrace_others=True, has_gdb=True, has_remote_exec=True)
    assert uses_remote_exec(new, with_it)
    assert not uses_remote_exec(new, ROOT)
    assert not uses_remote_exec(PLAIN, with_it)


def test_versions_and_the_remote_debug_opt_out_are_read():
    assert parse_version("Python 3.12.1\n") == (3, 12, 1)
    assert parse_version("Python 3.14.0rc1") == (3, 14, 0)
    assert parse_version("GNU bash, version 5.2") is None
    assert disables_remote_debug([b"PYTHON_DISABLE_REMOTE_DEBUG=1"], [b"python"])
    assert not disables_remote_debug([b"PYTHON_DISABLE_REMOTE_DEBUG="], [b"python"])
    assert disables_remote_debug([], [b"python", b"-X", b"disable-remote-debug", b"x.py"])
    assert not disables_remote_debug([b"HOME=/"], [b"python", b"x.py"])


@pytest.mark.parametrize(("answer", "status", "line"), [
    ({"status": "linked"}, "linked", "linked pid 4242"),
    ({"status": "already"}, "already", "pid 4242 was linked already"),
    ({"status": "no-raydebug", "python": "3.10.13", "executable": "/usr/bin/python3"},
     "refused", "pid 4242: raydebug cannot be imported in it (Python 3.10.13, "
                "/usr/bin/python3): install raydebug in its environment"),
    ({"status": "own", "why": "it runs raydebug itself (a hub or a command)"}, "refused",
     "pid 4242: not linked: it runs raydebug itself"),
    ({"status": "failed", "why": "ConfigurationError: x"}, "failed",
     "pid 4242: the link failed in it (ConfigurationError: x)"),
])
def test_the_bootstraps_answer_is_one_line(answer: dict, status: str, line: str):
    outcome = _outcome(PLAIN, answer, 0.1)
    assert outcome.status == status and outcome.line.startswith(line), outcome


def test_gdbs_words_are_read():
    assert gdb_problem("", "ptrace: Operation not permitted.\n", 1).startswith(
        "no ptrace rights")
    assert gdb_problem("$1 = (void *) 0x5581\n$2 = 0\n", "", 0) is None
    # Its warnings on stderr are not failures (found by use: gdb's declined auto-load of
    # python3.11-gdb.py made a link that worked say "gdb failed (exit 0): warning: ...").
    assert gdb_problem("$1 = (void *) 0x5581\n$2 = 0\n",
                       'warning: File "/x/python3.11-gdb.py" auto-loading has been declined\n',
                       0) is None
    assert gdb_problem("$1 = (void *) 0x5581\n$2 = 1\n", "warning: w\n", 0) == (
        "gdb failed (exit 0): $2 = 1")
    assert gdb_problem("", "Couldn't write extended state status: Bad address.\n"
                       "No symbol \"DoAttach\" in current context.\n", 0).startswith(
        "gdb found no dlopen/DoAttach")
    command = gdb_command(42, "exec(open(bytes([47]).decode()).read(), dict())", Path("/a.so"))
    assert command[:6] == ["gdb", "--nx", "--nh", "--batch", "--pid", "42"]
    assert "--init-eval-command=set auto-load off" in command
    with pytest.raises(ValueError):
        gdb_command(42, 'print("x")', Path("/a.so"))


@pytest.mark.skipif(sys.platform != "linux", reason="ELF and /proc")
def test_pythons_functions_are_found_in_this_process():
    functions = python_functions(__import__("os").getpid())
    here = ctypes.pythonapi
    assert functions.run == ctypes.cast(here.PyRun_SimpleString, ctypes.c_void_p).value
    assert functions.ensure == ctypes.cast(here.PyGILState_Ensure, ctypes.c_void_p).value
    assert any("python" in path for path, _ in mapped_files(__import__("os").getpid()))
    assert find_symbols(sys.executable, ("no_such_symbol",)) == {}


def test_a_worker_of_another_job_is_skipped_not_failed():
    outcome = _outcome(PLAIN, {"status": "skipped", "why": "job ffffffff"}, 0.1)
    assert outcome.status == "skipped" and outcome.ok


def test_ray_terms_pick_processes_and_jobs():
    from raydebug.integrations.ray.link_jobs import RayProcess, pick, picked_jobs

    worker = RayProcess(10, "aa11", "10.0.0.1", "", "w1", "Trainer")
    other = RayProcess(11, "bb22", "10.0.0.2", "")
    driver = RayProcess(12, "aa11", "10.0.0.1", "02000000", driver=True)
    everyone = [worker, other, driver]
    assert pick(everyone, []) == everyone
    assert pick(everyone, [("node", "aa")]) == [worker, driver]
    assert pick(everyone, [("node", "10.0.0.2")]) == [other]
    assert pick(everyone, [("actor", "Trainer")]) == [worker]
    assert pick(everyone, [("pid", "11")]) == [other]
    # a worker's job is known only inside it: kept here, checked by its bootstrap
    assert pick(everyone, [("job", "01")]) == [worker, other]
    assert picked_jobs(["01000000", "02000000"], [("job", "02")]) == ["02000000"]
    assert picked_jobs(["01000000", "02000000"], []) == ["01000000", "02000000"]
    assert driver.identity() == {"job_id": "02000000", "node_id": "aa11",
                                 "node_ip": "10.0.0.1"}


def test_ps_says_how_many_workers_are_not_linked_and_how_to_link_them():
    from raydebug.integrations.ray.link_jobs import RayProcess, unlinked, unlinked_notice

    workers = [RayProcess(10, "aa", "10.0.0.1", ""), RayProcess(11, "bb", "10.0.0.2", ""),
               RayProcess(12, "aa", "10.0.0.1", "01000000", driver=True)]
    assert unlinked(workers, {("aa", 10)}) == [workers[1]]  # a driver is not a worker
    assert unlinked_notice(0, "head:6379") == ""
    assert unlinked_notice(1, "head:6379").startswith("1 Ray worker is not linked")
    assert unlinked_notice(3, "head:6379") == (
        "3 Ray workers are not linked (idle ones among them): `raydebug link --ray-address "
        "head:6379` links those of the running jobs")


def test_a_raydebug_of_another_link_protocol_is_refused_at_once():
    from raydebug.linking.inside import protocol_mismatch
    from raydebug.protocol.control import PROTOCOL_VERSION

    assert protocol_mismatch({"protocol": PROTOCOL_VERSION}) is None
    assert protocol_mismatch({}) is None  # a ticket that does not say
    other = protocol_mismatch({"protocol": PROTOCOL_VERSION + 1})
    assert other is not None and other["status"] == "protocol"
    outcome = _outcome(PLAIN, other, 0.1)
    assert outcome.status == "refused" and outcome.line.startswith(
        "pid 4242: its raydebug (") and outcome.line.endswith(
        f"speaks link protocol {PROTOCOL_VERSION} and this raydebug {PROTOCOL_VERSION + 1}: "
        "install the same raydebug version in its environment"), outcome.line


def test_the_wait_for_the_listing_ends_when_the_unlisted_have_exited(
        monkeypatch: pytest.MonkeyPatch):
    """A process linked then ended (a Ray worker its raylet ends as idle) is never listed:
    the wait stops for it once ``gone`` says so, not at the timeout."""
    now = [0.0]
    monkeypatch.setattr(local.time, "monotonic", lambda: now[0])
    monkeypatch.setattr(local.time, "sleep",
                        lambda seconds: now.__setitem__(0, now[0] + seconds))
    asked: list[set[int]] = []

    def gone(unlisted: set[int]) -> set[int]:
        asked.append(set(unlisted))
        return unlisted & {7}

    assert local.wait_listed([5, 7], lambda: {5}, 20.0, gone) == {5}
    assert asked == [{7}] and now[0] < local.GONE_EVERY + 1  # asked once, after ~1 s
    started = now[0]
    assert local.wait_listed([5, 7], lambda: {5}, 3.0, lambda unlisted: set()) == {5}
    assert now[0] - started == pytest.approx(3.0)  # one alive, unlisted: until the timeout


def test_a_zombie_no_longer_runs(tmp_path: Path):
    for pid, stat in [(1, "1 (python3 a (b)) S 0 1"), (2, "2 (python3 a (b)) Z 1 2")]:
        (tmp_path / str(pid)).mkdir()
        (tmp_path / str(pid) / "stat").write_text(stat)
    assert runs(1, str(tmp_path)) and not runs(2, str(tmp_path)) and not runs(3, str(tmp_path))


def test_a_live_worker_of_another_job_is_skipped_not_linked_already(
        monkeypatch: pytest.MonkeyPatch):
    """Found by use: `raydebug link --ray-address A job=04000000` said 'pid 1303 was linked
    already' of each worker that an earlier link of job 01000000 had linked."""
    from raydebug.agent.link import live
    from raydebug.linking import inside

    monkeypatch.setattr(live, "is_live", lambda: True)
    monkeypatch.setattr(inside, "_ray_job", lambda: "01000000", raising=False)
    assert inside.link({"jobs": ["04000000"]}) == {"status": "skipped", "why": "job 01000000"}
    assert inside.link({"jobs": ["01000000"]}) == {"status": "already"}
    assert inside.link({}) == {"status": "already"}  # pid=N: no job asked


def test_a_process_another_tracer_holds_is_refused_naming_it():
    """Found by use: `raydebug link pid=P` of a process strace was attached to said "no
    ptrace rights over it: link it as its user or as root..." to root. A real process,
    seized by this one (PTRACE_SEIZE does not stop it)."""
    import os
    import subprocess

    from raydebug.linking.target import read_target, this_linker

    child = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()"],
                             stdin=subprocess.PIPE)
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.ptrace(0x4206, child.pid, None, None) == -1:  # PTRACE_SEIZE
            pytest.skip(f"this process may not ptrace its child: errno {ctypes.get_errno()}")
        why = refusal(read_target(child.pid), this_linker())
    finally:
        child.kill()
        child.wait(timeout=10)
    assert why is not None and why.startswith(f"pid {child.pid}: pid {os.getpid()} ("), why
    assert "traces it" in why and "\n" not in why, why
