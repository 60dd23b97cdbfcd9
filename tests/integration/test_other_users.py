"""Another local user cannot use the hub's loopback client port; the hub's own user can.

A real second Unix user, created for the test and removed afterwards, runs real clients
(``raydebug list``, and a DAP client sending ``initialize``) against a root-run hub with a
paused worker: both are refused, naming their uid, and the hub logs it. The hub's user then
lists and debugs the worker as usual.
"""

from __future__ import annotations

import json
import os
import pwd
import secrets
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

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


@pytest.fixture
def other_user() -> Iterator[tuple[int, int]]:
    """A throwaway Unix user: (uid, gid); deleted afterwards."""
    if os.geteuid() != 0 or not shutil.which("useradd") or not shutil.which("setpriv"):
        pytest.skip("needs root, useradd and setpriv to create and become another user")
    name = f"rdbg{secrets.token_hex(3)}"
    subprocess.run(["useradd", "--no-create-home", "--shell", "/usr/sbin/nologin",
                    "--user-group", name], check=True, timeout=TIMEOUT)
    try:
        entry = pwd.getpwnam(name)
        yield entry.pw_uid, entry.pw_gid
    finally:
        subprocess.run(["userdel", name], check=True, timeout=TIMEOUT)  # its group too


def become(user: tuple[int, int]) -> list[str]:
    uid, gid = user
    return ["setpriv", f"--reuid={uid}", f"--regid={gid}", "--clear-groups"]


def as_user(user: tuple[int, int], *command: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*become(user), *command], capture_output=True, text=True,
                          timeout=TIMEOUT, env={"PATH": os.environ["PATH"],
                                                "HOME": "/nonexistent", "NO_COLOR": "1"})


def test_another_user_is_refused_and_the_hubs_user_is_not(hub: HubProcess, tmp_path: Path,
                                                          other_user: tuple[int, int]):
    uid = other_user[0]
    proc = hub.spawn(write_script(tmp_path, "worker.py", PAUSING_WORKER))
    [session] = hub.wait_sessions(1)
    why = f"this hub serves its own user (uid {os.geteuid()}) and root only"

    listed = as_user(other_user, sys.executable, "-m", "raydebug", "list", "--hub",
                     hub.client_address, "--json")
    assert listed.returncode == 1, listed
    error = " ".join(listed.stderr.split())  # as one line, however the terminal wrapped it
    assert "HTTP 403" in error and why in error and f"belongs to uid {uid}" in error
    assert session["id"] not in listed.stdout

    dap = as_user(other_user, sys.executable, "-c", DAP_CLIENT, *hub.client_address.split(":"))
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


def test_a_hub_run_by_another_user_serves_that_user_and_root(other_user: tuple[int, int]):
    """The rule is "the hub's own uid", not "root": a hub of an ordinary user serves it."""
    state = tempfile.mkdtemp(prefix="raydebug-other-user-")
    os.chown(state, *other_user)  # where that user's hub writes its state file
    proc = subprocess.Popen(
        [*become(other_user), sys.executable, "-m", "raydebug", "hub", "--port", "0",
         "--worker-port", "0", "--token", "t"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        text=True, env={"PATH": os.environ["PATH"], "HOME": "/nonexistent",
                        "XDG_STATE_HOME": state})
    try:
        words = read_line(proc).split()  # "raydebug hub ready: clients H:P workers H:P"
        host, port = words[4].rsplit(":", 1)
        hub = HubProcess(proc, (host, int(port)), ("127.0.0.1", 0), "t")
        listed = as_user(other_user, sys.executable, "-m", "raydebug", "list", "--hub",
                         hub.client_address, "--json")
        assert listed.returncode == 0 and json.loads(listed.stdout) == [], listed
        assert hub.get("/api/health")["status"] == "ok"  # root: admitted too
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        finally:
            stop(proc)
        shutil.rmtree(state, ignore_errors=True)
