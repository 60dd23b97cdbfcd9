"""``raydebug tunnel``: one SSH forward from a laptop to the hub, kept up.

Uses the system ``ssh`` (so ``~/.ssh/config``, agents, jump hosts and keys work as usual).
The remote ``raydebug hub-address`` says where the hub listens on the remote machine,
whether it was started by hand or through Ray; then one ``ssh -N -L`` forward carries every
session, the list and the HTTP API. When ssh exits the tunnel says so and reconnects; on
Ctrl-C it stops ssh and leaves no process behind.
"""

from __future__ import annotations

import json
import shlex
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from .errors import ConfigurationError, HubUnreachableError

READY_TIMEOUT = 20.0
RETRY_DELAYS = (1.0, 2.0, 5.0, 10.0)


@dataclass(frozen=True)
class Tunnel:
    destination: str
    ssh_options: Sequence[str]  # KEY=VALUE, each passed as -o KEY=VALUE
    local_port: int
    remote_raydebug: str = "raydebug"
    ssh: str = "ssh"

    def ssh_command(self, *extra: str) -> list[str]:
        options = [part for option in self.ssh_options for part in ("-o", option)]
        return [self.ssh, *options, *extra, self.destination]

    def remote_hub(self) -> str:
        """Ask the remote raydebug where its hub serves clients: the ``-L`` target,
        ``host:port``, or the Unix socket's path when the hub has one (preferred: only the
        hub's user can open it)."""
        command = [*self.ssh_command("-o", "BatchMode=yes"),
                   *shlex.split(self.remote_raydebug), "hub-address", "--json"]
        try:
            result = subprocess.run(command, capture_output=True, text=True, timeout=60)
        except (OSError, subprocess.TimeoutExpired) as error:
            raise HubUnreachableError(f"ssh {self.destination} failed: {error}") from None
        if result.returncode != 0:
            detail = (result.stderr.strip().splitlines() or ["no output"])[-1]
            raise HubUnreachableError(
                f"could not ask {self.destination} for its hub ({detail}); is raydebug on the "
                "remote PATH (or pass --remote-raydebug), and is a hub running there?")
        try:
            answer = json.loads(result.stdout)
            if answer.get("unix"):
                return str(answer["unix"])
            host, port = str(answer["client"]).rsplit(":", 1)
            return f"{host}:{int(port)}"
        except (ValueError, KeyError, AttributeError) as error:
            raise HubUnreachableError(
                f"unexpected answer from {self.destination}: {result.stdout[:200]!r}") from error

    def forward(self, remote: str) -> subprocess.Popen[bytes]:
        return subprocess.Popen(self.ssh_command(
            "-N", "-o", "ExitOnForwardFailure=yes", "-o", "ServerAliveInterval=15",
            "-o", "ServerAliveCountMax=3", "-o", "BatchMode=yes",
            "-L", f"127.0.0.1:{self.local_port}:{remote}"),
            stdin=subprocess.DEVNULL, preexec_fn=_die_with_parent)


def _die_with_parent() -> None:
    """In the ssh child: end when the tunnel process ends, even by SIGKILL (Linux), so no
    ssh is ever left behind holding the port."""
    if sys.platform.startswith("linux"):
        import ctypes
        import signal

        pr_set_pdeathsig = 1
        ctypes.CDLL(None).prctl(pr_set_pdeathsig, signal.SIGTERM)


def check_local_port(port: int) -> None:
    """Raise ConfigurationError, with the next free port, when ``port`` is taken."""
    if _bindable(port):
        return
    suggestion = next((p for p in range(port + 1, port + 100) if _bindable(p)), None)
    hint = f"; try --local-port {suggestion}" if suggestion else ""
    raise ConfigurationError(f"local port {port} is already in use{hint}")


def _bindable(port: int) -> bool:
    with socket.socket() as probe:
        try:
            probe.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def wait_ready(port: int, ssh: subprocess.Popen[bytes], timeout: float = READY_TIMEOUT) -> bool:
    """True once the hub answers through the tunnel; False if ssh exits or time runs out.

    ssh offers no signal for "forward established", so this asks the hub's health endpoint
    through the local port, a bounded number of times.
    """
    deadline = time.monotonic() + timeout
    while ssh.poll() is None and time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/api/health", timeout=2):
                return True
        except urllib.error.HTTPError:
            return True  # the hub answered (it wants a client token): the tunnel works
        except OSError:
            time.sleep(0.1)
    return False


def run_tunnel(tunnel: Tunnel, say: Callable[[str], None], ready: Callable[[int], None]) -> None:
    """Keep the forward up until interrupted (KeyboardInterrupt); always stops ssh."""
    check_local_port(tunnel.local_port)
    attempt = 0
    announced = False
    while True:
        remote = tunnel.remote_hub()
        ssh = tunnel.forward(remote)
        try:
            if wait_ready(tunnel.local_port, ssh):
                attempt = 0
                if not announced:
                    ready(tunnel.local_port)
                    announced = True
                else:
                    say(f"tunnel to {tunnel.destination} is up again")
            code = ssh.wait()
        finally:
            if ssh.poll() is None:
                ssh.terminate()
                try:
                    ssh.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    ssh.kill()
                    ssh.wait()
        delay = RETRY_DELAYS[min(attempt, len(RETRY_DELAYS) - 1)]
        attempt += 1
        say(f"the tunnel to {tunnel.destination} dropped (ssh exited with {code}); "
            f"reconnecting in {delay:g}s")
        time.sleep(delay)


def main_loop(tunnel: Tunnel, say: Callable[[str], None], ready: Callable[[int], None]) -> int:
    try:
        run_tunnel(tunnel, say, ready)
    except KeyboardInterrupt:
        say("tunnel closed")
        return 0
    return 0  # pragma: no cover - run_tunnel only returns by an exception


if __name__ == "__main__":  # pragma: no cover
    sys.exit("use `raydebug tunnel`")
