"""`raydebug tunnel` through a real sshd on loopback standing in for the head node."""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from helpers import HubProcess, finish, read_line, run, stop, write_script

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]

SSHD = "/usr/sbin/sshd"
WORKER = """
import sys
tag = sys.argv[1]
breakpoint()
print("finished", tag, flush=True)
"""


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.fixture
def sshd(tmp_path: Path) -> Iterator[list[str]]:
    """A throwaway sshd on a loopback port; yields the --ssh-option values to reach it."""
    if not os.path.exists(SSHD) or os.geteuid() != 0:
        pytest.skip("needs root and Debian's openssh-server (.ci/run installs it)")
    keys = tmp_path / "ssh"
    keys.mkdir()
    for name in ("host_key", "client_key"):
        subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(keys / name)],
                       check=True, timeout=30)
    shutil.copy(keys / "client_key.pub", keys / "authorized_keys")
    port = free_port()
    config = keys / "sshd_config"
    config.write_text("\n".join([
        f"Port {port}", "ListenAddress 127.0.0.1", f"HostKey {keys / 'host_key'}",
        f"AuthorizedKeysFile {keys / 'authorized_keys'}", f"PidFile {keys / 'sshd.pid'}",
        "StrictModes no", "PermitRootLogin yes", "PasswordAuthentication no",
        "KbdInteractiveAuthentication no", "UsePAM no", "AllowTcpForwarding yes", ""]))
    Path("/run/sshd").mkdir(exist_ok=True)  # sshd's privilege separation directory
    daemon = subprocess.Popen([SSHD, "-D", "-e", "-f", str(config)],
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        assert daemon.stderr is not None
        for line in daemon.stderr:  # "Server listening on 127.0.0.1 port N."
            if "Server listening" in line:
                break
        else:
            pytest.fail("sshd did not start")
        yield [f"IdentityFile={keys / 'client_key'}", f"Port={port}",
               "StrictHostKeyChecking=no", "UserKnownHostsFile=/dev/null", "LogLevel=ERROR"]
    finally:
        stop(daemon)


def start_tunnel(sshd_options: list[str], local_port: int,
                 hub: HubProcess) -> subprocess.Popen[str]:
    """`raydebug tunnel` to the test sshd, both sides in ``hub``'s state directory (one
    machine here): the remote side finds the hub through the state file it wrote there, and
    the tunnel's record is beside it, for a `raydebug web` run in it."""
    remote = (f"env XDG_STATE_HOME={hub.state} "
              f"{Path(sys.executable).parent / 'raydebug'}")
    options = [arg for option in sshd_options for arg in ("--ssh-option", option)]
    return subprocess.Popen(
        [sys.executable, "-m", "raydebug", "tunnel", "root@127.0.0.1", *options,
         "--local-port", str(local_port), "--remote-raydebug", remote],
        env={**os.environ, "XDG_STATE_HOME": str(hub.state)},
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _state(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/status").read_text().split("State:")[1].split("\n")[0].lower()
    except (OSError, IndexError):
        return "zombie"


def ssh_children(pid: int) -> list[int]:
    children = Path(f"/proc/{pid}/task/{pid}/children")
    pids = [int(p) for p in children.read_text().split()] if children.exists() else []
    return [p for p in pids if b"ssh" in Path(f"/proc/{p}/cmdline").read_bytes()]


def test_one_tunnel_reaches_every_session_and_survives_ssh_dying(hub: HubProcess,
                                                                 sshd: list[str],
                                                                 tmp_path: Path):
    script = write_script(tmp_path, "worker.py", WORKER)
    procs = [hub.spawn(script, tag) for tag in ("one", "two")]
    hub.wait_sessions(2)
    local_port = free_port()
    tunnel = start_tunnel(sshd, local_port, hub)
    try:
        assert read_line(tunnel, timeout=60).startswith(
            f"raydebug tunnel ready: 127.0.0.1:{local_port}")
        listed = subprocess.run([sys.executable, "-m", "raydebug", "list", "--json", "--hub",
                                 f"127.0.0.1:{local_port}"], capture_output=True, text=True,
                                timeout=60)
        sessions = json.loads(listed.stdout)
        assert {s["pid"] for s in sessions} == {p.pid for p in procs}
        web = [sys.executable, "-m", "raydebug", "web"]
        page = subprocess.run(web, capture_output=True, text=True, timeout=60,
                              env={**os.environ, "XDG_STATE_HOME": str(hub.state)})
        assert page.stdout.startswith(f"http://127.0.0.1:{local_port}/\n"), page  # the tunnel

        [ssh] = ssh_children(tunnel.pid)
        os.kill(ssh, signal.SIGKILL)  # the connection drops: the tunnel reconnects
        assert tunnel.stderr is not None
        line = tunnel.stderr.readline()
        assert "dropped" in line and "reconnecting" in line
        assert "is up again" in tunnel.stderr.readline()

        async def debug_through_the_tunnel() -> None:
            from raydebug.client.dap import DapClient

            for session in sessions:
                client = await DapClient.connect("127.0.0.1", local_port)
                await client.initialize()
                await client.attach(session["id"])
                await client.request("disconnect", {})
                await client.close()

        run(debug_through_the_tunnel())
        assert all(finish(p)[0] == 0 for p in procs)
        [ssh] = ssh_children(tunnel.pid)
        tunnel.send_signal(signal.SIGINT)  # Ctrl-C
        assert tunnel.wait(timeout=30) == 0
        assert not Path(f"/proc/{ssh}").exists()  # no ssh left behind
        page = subprocess.run(web, capture_output=True, text=True, timeout=60,
                              env={**os.environ, "XDG_STATE_HOME": str(hub.state)})
        assert page.stdout.startswith(f"http://{hub.client_address}/\n"), page  # tunnel gone
    finally:
        stop(tunnel)


def test_a_busy_local_port_is_refused_with_the_next_free_one(tmp_path: Path):
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        result = subprocess.run([sys.executable, "-m", "raydebug", "tunnel", "nowhere",
                                 "--local-port", str(port)], capture_output=True, text=True,
                                timeout=60)
    assert result.returncode == 1
    assert f"local port {port} is already in use; try --local-port" in result.stderr


def test_the_unix_socket_is_private_and_the_tunnel_prefers_it(sshd: list[str], tmp_path: Path):
    from helpers import start_hub

    sock_path = tmp_path / "run" / "hub.sock"
    hub = start_hub("--unix-socket", str(sock_path))
    tunnel = None
    try:
        status = sock_path.stat()
        assert status.st_mode & 0o777 == 0o600  # other local users cannot connect
        assert status.st_uid == os.getuid()
        with socket.socket(socket.AF_UNIX) as client:  # the hub answers on it
            client.connect(str(sock_path))
            client.sendall(b"GET /api/health HTTP/1.1\r\nHost: localhost\r\n\r\n")
            assert client.recv(65536).startswith(b"HTTP/1.1 200")

        local_port = free_port()
        tunnel = start_tunnel(sshd, local_port, hub)
        assert read_line(tunnel, timeout=60).startswith("raydebug tunnel ready")
        [ssh] = ssh_children(tunnel.pid)
        forward = Path(f"/proc/{ssh}/cmdline").read_bytes().split(b"\0")
        assert f"127.0.0.1:{local_port}:{sock_path}".encode() in forward  # ssh -L to the socket
        listed = subprocess.run([sys.executable, "-m", "raydebug", "list", "--json", "--hub",
                                 f"127.0.0.1:{local_port}"], capture_output=True, text=True,
                                timeout=60)
        assert json.loads(listed.stdout) == []
        tunnel.kill()  # even killed outright, the tunnel takes its ssh with it
        tunnel.wait(timeout=30)
        deadline = time.monotonic() + 10
        while Path(f"/proc/{ssh}").exists() and "zombie" not in _state(ssh):
            assert time.monotonic() < deadline, "ssh outlived its tunnel"
            time.sleep(0.05)  # the kernel's parent-death signal has no event to wait on
    finally:
        if tunnel is not None:
            tunnel.send_signal(signal.SIGINT)  # Ctrl-C: the tunnel stops its ssh
            tunnel.wait(timeout=30)
            stop(tunnel)
        hub.close()
    assert not sock_path.exists()  # removed when the hub exits
