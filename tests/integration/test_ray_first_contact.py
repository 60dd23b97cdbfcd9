"""A new user's first commands against a real `ray start --head` on loopback, as Ray 2.60
starts it when a token exists: with token authentication on. The commands run from a shell
that has neither RAY_AUTH_MODE nor RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER set, and find Ray's token
where Ray keeps it (~/.ray/auth_token, under a HOME of the test's own, so that no other
user's token is touched). One cluster for the module."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from helpers import write_script
from ray_cluster import first_contact_bound, ray_start_head

pytest.importorskip("ray")
pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]

RAYDEBUG = [sys.executable, "-m", "raydebug"]
# What a user's shell may carry that would make these tests pass without the fixes.
NOT_SET = ("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "RAY_AUTH_MODE", "RAY_AUTH_TOKEN",
           "RAY_AUTH_TOKEN_PATH", "RAY_ADDRESS")

JOB = """
import ray

ray.init()

@ray.remote(num_cpus=0)
def answer():
    return 42

print("result", ray.get(answer.remote()), flush=True)
"""


def shell_env(home: Path, **extra: str) -> dict[str, str]:
    """A user's shell: none of :data:`NOT_SET`, ``home`` as HOME."""
    env = {name: value for name, value in os.environ.items() if name not in NOT_SET}
    return {**env, "HOME": str(home), **extra}


@dataclass
class Head:
    gcs: str
    home: Path  # HOME of the cluster's user: its .ray/auth_token


@pytest.fixture(scope="module")
def head() -> Iterator[Head]:
    """`ray start --head --block` on loopback, with a token in its user's ~/.ray (so Ray
    turns token authentication on, as it does once any local ray.init() wrote one)."""
    home = Path(tempfile.mkdtemp(prefix="rdhome"))
    (home / ".ray").mkdir()
    (home / ".ray" / "auth_token").write_text(uuid.uuid4().hex)
    try:
        with ray_start_head(shell_env(home, RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER="0")) as started:
            assert "Token authentication is enabled" in started.output, started.output[-2000:]
            yield Head(started.gcs, home)
    finally:
        shutil.rmtree(home, ignore_errors=True)


def raydebug(*args: str, env: dict[str, str],
             timeout: float | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*RAYDEBUG, *args], capture_output=True, text=True, env=env,
                          timeout=timeout or first_contact_bound())


def test_list_starts_the_hub_of_a_loopback_cluster_with_rays_token(head: Head):
    started = time.monotonic()
    listed = raydebug("list", "--ray-address", head.gcs, env=shell_env(head.home))
    took = time.monotonic() - started
    assert listed.returncode == 0, listed.stderr
    text = " ".join(listed.stdout.split())
    assert text.startswith("no sessions on the hub at "), listed.stdout
    assert f"the hub of the Ray cluster at {head.gcs}" in text, listed.stdout
    assert took < first_contact_bound(), took
    assert "InvalidAuthToken" not in listed.stderr, listed.stderr  # the refusal is not news


def test_run_gives_the_driver_rays_token_and_loopback_and_says_rays_debugger_is_ignored(
        head: Head, tmp_path: Path):
    """`RAY_ADDRESS=127.0.0.1:PORT raydebug run`, from a shell with neither variable, of a
    script written for Ray's own debugger (without the loopback kept, Ray's driver retries
    the machine's address for minutes)."""
    script = write_script(tmp_path, "job.py", JOB)
    env = shell_env(head.home, RAY_ADDRESS=head.gcs, RAY_DEBUG="1",
                    RAY_DEBUGGER_HOST="0.0.0.0")
    done = raydebug("run", "--", sys.executable, str(script), env=env, timeout=120)
    assert "result 42" in done.stdout, done.stdout[-2000:] + done.stderr[-2000:]
    notices = [line for line in done.stderr.splitlines()
               if "RAY_DEBUG=1 and RAY_DEBUGGER_HOST=0.0.0.0 (Ray's own debugger) ignored" in line]
    assert len(notices) == 1, done.stderr[-3000:]
    assert "no debugger listens beyond loopback" in notices[0]


def test_link_keeps_to_loopback_as_every_command(head: Head):
    """`raydebug link --ray-address 127.0.0.1:PORT` from a user's shell: its driver stays on
    loopback (without it, Ray's driver retried the machine's address for minutes)."""
    started = time.monotonic()
    done = raydebug("link", "--ray-address", head.gcs, env=shell_env(head.home))
    took = time.monotonic() - started
    assert done.returncode == 1, done.stdout + done.stderr  # (no job runs)
    *notes, line = done.stderr.strip().splitlines()
    assert line.startswith("raydebug: no job runs on the cluster of the hub at "), line
    assert notes and all(note.startswith("raydebug: ") and (
        "starting it" in note or "linking from a task" in note) for note in notes), notes
    assert took < first_contact_bound(), took


def test_without_the_token_each_command_says_so_in_one_line(head: Head, tmp_path: Path):
    """Another user's shell (no token in its HOME): one line, at once; the job never runs
    (Ray's driver would retry every second for as long as it is let)."""
    elsewhere = shell_env(tmp_path, RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER="0")
    listed = raydebug("list", "--ray-address", head.gcs, env=elsewhere, timeout=30)
    script = write_script(tmp_path, "job.py", JOB)
    ran = raydebug("run", "--", sys.executable, str(script),
                   env={**elsewhere, "RAY_ADDRESS": head.gcs}, timeout=30)
    for done in (listed, ran):
        assert done.returncode == 1, done.stdout + done.stderr
        [line] = done.stderr.strip().splitlines()
        assert f"the Ray cluster at {head.gcs} asks for its token and no token was found" \
            in line, line
        assert "~/.ray/auth_token" in line
    assert "result" not in ran.stdout


def test_a_driver_that_cannot_reach_the_cluster_is_bounded(monkeypatch: pytest.MonkeyPatch):
    """Where a GCS accepts the connection and never answers, ray.init waits for minutes:
    the hub's starter gives up at its bound and says which step did not finish."""
    from raydebug.errors import HubUnreachableError
    from raydebug.integrations.ray import hub_starter

    monkeypatch.setattr(hub_starter, "RAY_CONNECT_TIMEOUT", 5.0)
    silent = socket.create_server(("127.0.0.1", 0))
    accepted: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        silent.settimeout(0.2)
        while not stop.is_set():
            try:
                accepted.append(silent.accept()[0])
            except OSError:
                continue

    acceptor = threading.Thread(target=accept, daemon=True)
    acceptor.start()
    address = f"127.0.0.1:{silent.getsockname()[1]}"
    started = time.monotonic()
    try:
        with pytest.raises(HubUnreachableError) as failure:
            hub_starter.start_cluster_hub(address, loopback=True)
    finally:
        stop.set()
        acceptor.join(timeout=5)
        for connection in accepted:
            connection.close()
        silent.close()
    assert time.monotonic() - started < 30
    message = str(failure.value)
    assert message.startswith(f"the Ray cluster at {address} has no raydebug hub yet, and "
                              "this machine could not connect to it as a Ray driver to start "
                              "one (gave up after 5 s"), message
