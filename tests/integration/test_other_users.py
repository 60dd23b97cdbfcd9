"""Another local user cannot use the hub's loopback client port; the hub's own user can.

A real second Unix user, created for the test and removed afterwards, runs real clients
(``raydebug list``, and a DAP client sending ``initialize``) against a root-run hub with a
paused worker: both are refused, naming their uid, and the hub logs it. The hub's user then
lists and debugs the worker as usual. A hub run by an ordinary user serves that user; and
through a real sshd, a forward (what ``raydebug tunnel`` runs) is the user who logged in.

The other users run raydebug from a copy that the test makes where they can read it: the
checkout and its venv may be in a directory only we can read (a clone in ``mktemp -d``).
"""

from __future__ import annotations

import json
import os
import pwd
import secrets
import shutil
import socket
import subprocess
import tempfile
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from devtools.other_user import copy_packages, python_for_user, run_as, user_env
from helpers import PAUSING_WORKER, TIMEOUT, HubProcess, finish, read_line, stop, write_script

pytestmark = pytest.mark.integration

DAP_CLIENT = """
import json, socket, sys
body = json.dumps({"seq": 1, "type": "request", "command": "initialize",
                   "arguments": {"adapterID": "x"}}).encode()
with socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=20) as sock:
    sock.sendall(b"Content-Length: %d\\r\\n\\r\\n" % len(body) + body)
    received = b""
    while chunk := sock.recv(65536):
        received += chunk
bodies = [part.split(b"\\r\\n\\r\\n", 1)[1] for part in received.split(b"Content-Length")[1:]]
print(json.dumps([json.loads(b) for b in bodies]))
"""


@pytest.fixture(scope="module")
def packages() -> Iterator[Path]:
    """A directory any user can read, for PYTHONPATH: raydebug and the distributions it
    requires (:func:`devtools.other_user.copy_packages`). Removed afterwards."""
    root = copy_packages()
    try:
        yield root
    finally:
        shutil.rmtree(root, ignore_errors=True)


@dataclass(frozen=True)
class User:
    """A Unix user other than ours, and the Python it runs raydebug with."""

    uid: int
    gid: int
    python: str
    packages: Path  # its PYTHONPATH

    def command(self, *args: str) -> list[str]:
        """``python *args``, run as this user."""
        return [*run_as(self.uid, self.gid), self.python, *args]

    def env(self, **variables: str) -> dict[str, str]:
        return user_env(self.packages, **variables)


def user(uid: int, gid: int, packages: Path) -> User:
    """``uid`` and a Python it can run that imports raydebug's client and hub from
    ``packages`` (:func:`devtools.other_user.python_for_user`). Skips the test when none
    can."""
    try:
        python = python_for_user(uid, gid, packages, "raydebug.cli.group", "raydebug.hub.server")
    except LookupError as tried:
        pytest.skip(f"another user can run no Python that imports raydebug from {packages} "
                    f"({tried})")
    return User(uid, gid, python, packages)


@pytest.fixture
def other_user(packages: Path) -> Iterator[User]:
    """A throwaway Unix user, deleted afterwards."""
    if os.geteuid() != 0 or not shutil.which("useradd") or not shutil.which("setpriv"):
        pytest.skip("needs root, useradd and setpriv to create and become another user")
    name = f"rdbg{secrets.token_hex(3)}"
    subprocess.run(["useradd", "--no-create-home", "--shell", "/usr/sbin/nologin",
                    "--user-group", name], check=True, timeout=TIMEOUT)
    try:
        entry = pwd.getpwnam(name)
        yield user(entry.pw_uid, entry.pw_gid, packages)
    finally:
        subprocess.run(["userdel", name], check=True, timeout=TIMEOUT)  # its group too


def as_user(other: User, *args: str) -> subprocess.CompletedProcess[str]:
    """``python *args`` as ``other``, finished."""
    return subprocess.run(other.command(*args), capture_output=True, text=True,
                          timeout=TIMEOUT, env=other.env(NO_COLOR="1"))


def test_another_user_is_refused_and_the_hubs_user_is_not(hub: HubProcess, tmp_path: Path,
                                                          other_user: User):
    uid = other_user.uid
    proc = hub.spawn(write_script(tmp_path, "worker.py", PAUSING_WORKER))
    [session] = hub.wait_sessions(1)
    why = f"this hub serves its own user (uid {os.geteuid()}) and root only"

    listed = as_user(other_user, "-m", "raydebug", "list", "--hub", hub.client_address,
                     "--json")
    assert listed.returncode == 1, listed
    error = " ".join(listed.stderr.split())  # as one line, however the terminal wrapped it
    assert "HTTP 403" in error and why in error and f"belongs to uid {uid}" in error
    assert session["id"] not in listed.stdout

    dap = as_user(other_user, "-c", DAP_CLIENT, *hub.client_address.split(":"))
    assert dap.returncode == 0, dap.stderr
    messages = json.loads(dap.stdout)
    [output] = [m for m in messages if m.get("event") == "output"]
    assert why in output["body"]["output"] and f"uid {uid}" in output["body"]["output"]
    [response] = [m for m in messages if m["type"] == "response"]
    assert response["command"] == "initialize" and response["success"] is False
    assert f"belongs to uid {uid}" in response["message"]
    assert not [m for m in messages if m.get("event") == "stopped"]

    # The hub's own user is unaffected: it lists and debugs the worker.
    assert [s["id"] for s in hub.get("/api/sessions")] == [session["id"]]
    assert hub.evaluate_and_detach(session["id"], "value") == "41"
    code, out, _ = finish(proc)
    assert code == 0 and "finished 42" in out
    health = hub.get("/api/health")
    assert health["refused_clients_not_admitted"] == 2
    log = hub.stop_and_read_log()
    assert log.count(f"belongs to uid {uid}") == 2, log


def test_a_hub_run_by_another_user_serves_that_user_and_root(other_user: User):
    """The rule is "the hub's own uid", not "root": a hub of an ordinary user serves it."""
    state = tempfile.mkdtemp(prefix="raydebug-other-user-")
    os.chown(state, other_user.uid, other_user.gid)  # where that user's hub writes its state
    proc = subprocess.Popen(
        other_user.command("-m", "raydebug", "hub", "--port", "0", "--agent-port", "0",
                           "--token", "t"), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        text=True, env=other_user.env(XDG_STATE_HOME=state))
    try:
        words = read_line(proc).split()  # "raydebug hub ready: clients H:P agents H:P"
        host, port = words[4].rsplit(":", 1)
        hub = HubProcess(proc, (host, int(port)), ("127.0.0.1", 0), "t")
        listed = as_user(other_user, "-m", "raydebug", "list", "--hub", hub.client_address,
                         "--json")
        assert listed.returncode == 0 and json.loads(listed.stdout) == [], listed
        assert hub.get("/api/health")["status"] == "ok"  # root: admitted too
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        finally:
            stop(proc)
        shutil.rmtree(state, ignore_errors=True)


SSHD = "/usr/sbin/sshd"


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@dataclass
class Login:
    """A throwaway user who can log in over ssh (with the fixture's client key)."""

    name: str
    uid: int
    gid: int
    home: Path


@pytest.fixture
def two_logins(tmp_path: Path) -> Iterator[tuple[list[Login], list[str]]]:
    """Two throwaway users and an sshd on loopback that lets them in with one key; yields
    them and the ssh options to log in. Users, homes and sshd are removed afterwards."""
    if os.geteuid() != 0 or not shutil.which("useradd") or not os.path.exists(SSHD):
        pytest.skip("needs root, useradd and Debian's openssh-server (.ci/run installs it)")
    keys = tmp_path / "ssh"
    keys.mkdir()
    for key in ("host_key", "client_key"):
        subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(keys / key)],
                       check=True, timeout=TIMEOUT)
    logins: list[Login] = []
    daemon = None
    try:
        for _ in range(2):
            name = f"rdbg{secrets.token_hex(3)}"
            # Password "*": no password login, yet not a locked account (sshd refuses those).
            subprocess.run(["useradd", "--create-home", "--shell", "/bin/sh", "--user-group",
                            "--password", "*", name], check=True, timeout=TIMEOUT)
            entry = pwd.getpwnam(name)
            login = Login(name, entry.pw_uid, entry.pw_gid, Path(entry.pw_dir))
            logins.append(login)
            (login.home / ".ssh").mkdir(mode=0o700)
            shutil.copy(keys / "client_key.pub", login.home / ".ssh" / "authorized_keys")
            for path in (login.home / ".ssh", login.home / ".ssh" / "authorized_keys"):
                os.chown(path, login.uid, login.gid)
        port = free_port()
        (keys / "sshd_config").write_text("\n".join([
            f"Port {port}", "ListenAddress 127.0.0.1", f"HostKey {keys / 'host_key'}",
            "AuthorizedKeysFile %h/.ssh/authorized_keys", f"PidFile {keys / 'sshd.pid'}",
            "PasswordAuthentication no", "KbdInteractiveAuthentication no", "UsePAM no",
            "AllowTcpForwarding yes", ""]))
        Path("/run/sshd").mkdir(exist_ok=True)  # sshd's privilege separation directory
        daemon = subprocess.Popen([SSHD, "-D", "-e", "-f", str(keys / "sshd_config")],
                                  stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        assert daemon.stderr is not None
        assert any("Server listening" in line for line in daemon.stderr)
        yield logins, ["-i", str(keys / "client_key"), "-p", str(port), "-o",
                       "StrictHostKeyChecking=no", "-o", "UserKnownHostsFile=/dev/null",
                       "-o", "LogLevel=ERROR", "-o", "BatchMode=yes"]
    finally:
        if daemon is not None:
            stop(daemon)
        for login in logins:
            subprocess.run(["userdel", "--remove", login.name], check=False, timeout=TIMEOUT,
                           capture_output=True)  # (it warns that there is no mail spool)


def get_through(port: int, timeout: float = TIMEOUT) -> tuple[int, object]:
    """GET /api/sessions on 127.0.0.1:``port`` once a forward there answers: (status, JSON).
    ssh says nothing when its forward is up, so ask until it answers (bounded)."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/api/sessions",
                                        timeout=timeout) as response:
                return response.status, json.loads(response.read())
        except urllib.error.HTTPError as error:
            return error.code, json.loads(error.read())
        except (urllib.error.URLError, ConnectionError):
            if time.monotonic() > deadline:
                raise
            threading.Event().wait(0.1)  # the forward is not listening yet


@pytest.mark.parametrize("who", ["the hub's user", "another user"])
def test_an_ssh_forward_is_the_user_who_logged_in(two_logins: tuple[list[Login], list[str]],
                                                  packages: Path, who: str):
    """The forward's socket on the head node belongs to the user who logged in (sshd's
    session process runs as them): that user's hub serves it, another user's is refused."""
    (owner, other), ssh_options = two_logins
    login = owner if who == "the hub's user" else other
    state = owner.home / "state"
    state.mkdir()
    os.chown(state, owner.uid, owner.gid)
    runner = user(owner.uid, owner.gid, packages)
    hub_proc = subprocess.Popen(
        runner.command("-m", "raydebug", "hub", "--port", "0", "--agent-port", "0", "--token",
                       "t"), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env=runner.env(HOME=str(owner.home), XDG_STATE_HOME=str(state)))
    forward = None
    try:
        client = read_line(hub_proc).split()[4]  # "raydebug hub ready: clients H:P ..."
        local_port = free_port()
        forward = subprocess.Popen(  # what `raydebug tunnel` runs, as `ssh -L` by hand
            ["ssh", *ssh_options, "-N", "-L", f"127.0.0.1:{local_port}:{client}",
             f"{login.name}@127.0.0.1"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        status, answer = get_through(local_port)
    finally:
        for proc in (forward, hub_proc):
            if proc is not None:
                stop(proc)
    assert hub_proc.stderr is not None
    log = hub_proc.stderr.read()
    if login is owner:
        assert (status, answer) == (200, []), answer
        assert "refused" not in log, log
    else:
        assert status == 403, answer
        assert isinstance(answer, dict) and f"belongs to uid {other.uid}" in answer["error"]
        assert f"refused: this hub serves its own user (uid {owner.uid})" in log, log
