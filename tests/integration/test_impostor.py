"""Whoever answers on the hub's address must prove the token before a worker gives it anything.

An impostor (a plain socket, no token) listens on the agent port, sends a challenge, answers
every hello with a welcome (reflecting the worker's own proof back) and asks for a data
channel, as the attack on an unauthenticated hub went. A real paused process must give it no
session record and no data channel, say so once, and continue after its wait timeout; the
real hub on the same port then gets it.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from helpers import PAUSING_WORKER, TIMEOUT, HubProcess, finish, start_hub, stop, write_script
from raydebug.protocol import NEED_DATA, frame
from raydebug.protocol.control import (
    PROTOCOL_VERSION,
    Challenge,
    ControlConnection,
    ControlMessage,
    Hello,
    OpenDataConnection,
    Refused,
    Welcome,
    encode_control,
)
from raydebug.protocol.handshake import new_nonce

pytestmark = pytest.mark.integration


@dataclass
class Impostor:
    """A listener on the agent port that does not know the token; records what it got."""

    version: int = PROTOCOL_VERSION
    received: list[ControlMessage] = field(default_factory=list)
    raw_after_welcome: bytearray = field(default_factory=bytearray)
    got_hello: threading.Event = field(default_factory=threading.Event)
    connections: int = 0

    def __post_init__(self) -> None:
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.address = "{}:{}".format(*self.listener.getsockname()[:2])
        self.port = int(self.listener.getsockname()[1])
        self._lock = threading.Lock()
        self._threads = [threading.Thread(target=self._accept, daemon=True)]
        self._threads[0].start()

    def _accept(self) -> None:
        while True:
            try:
                sock, _ = self.listener.accept()
            except OSError:
                return  # closed
            with self._lock:
                self.connections += 1
            thread = threading.Thread(target=self._serve, args=(sock,), daemon=True)
            self._threads.append(thread)
            thread.start()

    def _serve(self, sock: socket.socket) -> None:
        stream = ControlConnection()
        with sock:
            sock.settimeout(TIMEOUT)
            try:
                sock.sendall(encode_control(Challenge(nonce=new_nonce(), version=self.version)))
                welcomed = False
                while data := sock.recv(65536):
                    if welcomed:
                        self.raw_after_welcome += data  # an Identify, sessions, DAP...
                        continue
                    stream.receive_data(data)
                    while (message := stream.next_event()) is not NEED_DATA:
                        assert isinstance(message, ControlMessage)
                        with self._lock:
                            self.received.append(message)
                        if isinstance(message, Hello):
                            self.got_hello.set()
                            # The worker's own proof reflected back as the hub's, then the
                            # request that made an unauthenticated worker hand over pydevd.
                            sock.sendall(encode_control(Welcome(proof=message.mac))
                                         + encode_control(OpenDataConnection(channel=1)))
                            welcomed = True
            except OSError:
                pass

    def close(self) -> None:
        try:
            self.listener.shutdown(socket.SHUT_RDWR)  # wakes the blocked accept() on Linux
        except OSError:
            pass  # closed already
        self.listener.close()
        for thread in self._threads:
            thread.join(timeout=TIMEOUT)


@pytest.fixture
def impostor() -> Iterator[Impostor]:
    fake = Impostor()
    try:
        yield fake
    finally:
        fake.close()


def spawn_worker(script: Path, address: str, token: str,
                 wait_timeout: str) -> subprocess.Popen[str]:
    """Run ``script`` pointed at the agent port ``address`` with ``token``."""
    env = dict(os.environ, PYTHONBREAKPOINT="raydebug.set_trace", RAYDEBUG_HUB=address,
               RAYDEBUG_TOKEN=token, RAYDEBUG_WAIT_TIMEOUT=wait_timeout,
               PYDEVD_DISABLE_FILE_VALIDATION="1", PYTHONUNBUFFERED="1")
    return subprocess.Popen([sys.executable, str(script)], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def test_an_impostor_on_the_agent_port_gets_nothing(impostor: Impostor, tmp_path: Path):
    script = write_script(tmp_path, "worker.py", PAUSING_WORKER)
    proc = spawn_worker(script, impostor.address, "the-real-token", wait_timeout="4")
    try:
        code, out, err = finish(proc)
    finally:
        stop(proc)
    assert code == 0 and "finished 42" in out, err  # continued after its wait timeout
    assert "Traceback" not in err, err
    warnings = [line for line in err.splitlines() if "did not prove it knows the token" in line]
    assert len(warnings) == 1, err  # said once, though it kept trying
    assert f"the hub at {impostor.address}" in warnings[0]
    assert "continuing" in err

    hellos = [m for m in impostor.received if isinstance(m, Hello)]
    assert len(hellos) >= 2, impostor.received  # it kept retrying in the background
    assert {h.role for h in hellos} == {"control"}  # never a data channel for pydevd
    assert all(isinstance(m, Hello) for m in impostor.received)  # no session record
    assert impostor.raw_after_welcome == b""  # no Identify (argv), no session, no DAP


def test_after_an_impostor_the_real_hub_gets_the_process(impostor: Impostor, tmp_path: Path):
    proc = spawn_worker(write_script(tmp_path, "worker.py", PAUSING_WORKER), impostor.address,
                        "test-token", wait_timeout="60")
    hub = None
    try:
        assert impostor.got_hello.wait(TIMEOUT)
        impostor.close()  # the impostor leaves; the real hub takes its port
        hub = start_hub("--agent-port", str(impostor.port))
        hub.workers.append(proc)
        [session] = hub.wait_sessions(1)
        assert session["pid"] == proc.pid
        assert hub.evaluate_and_detach(session["id"], "value") == "41"
        code, out, err = finish(proc)
        assert code == 0 and "finished 42" in out, err
        assert "did not prove it knows the token" in err
        assert f"connected to the hub at {impostor.address}" in err
        assert not [m for m in impostor.received if not isinstance(m, Hello)]
    finally:
        stop(proc)
        if hub is not None:
            hub.close()


def test_an_old_hub_is_refused_naming_both_versions(tmp_path: Path):
    old = Impostor(version=1)
    try:
        proc = spawn_worker(write_script(tmp_path, "worker.py", PAUSING_WORKER), old.address,
                            "test-token", wait_timeout="2")
        try:
            code, out, err = finish(proc)
        finally:
            stop(proc)
    finally:
        old.close()
    assert code == 0 and "finished 42" in out, err
    assert (f"the hub at {old.address} speaks link protocol 1 and this process "
            f"{PROTOCOL_VERSION}") in err
    assert old.received == []  # it did not even answer the challenge


def test_an_old_agent_is_refused_naming_both_versions(hub: HubProcess):
    """What a version-1 agent did: answer any challenge with its MAC and its process."""
    with socket.create_connection(hub.worker, timeout=TIMEOUT) as sock:
        stream = ControlConnection()
        while (challenge := stream.next_event()) is NEED_DATA:
            stream.receive_data(sock.recv(65536))
        assert isinstance(challenge, Challenge) and challenge.version == PROTOCOL_VERSION
        sock.sendall(frame(json.dumps({"type": "hello", "role": "control", "mac": "0" * 64,
                                       "version": 1, "process": {"pid": 1}}).encode()))
        while (reply := stream.next_event()) is NEED_DATA:
            data = sock.recv(65536)
            stream.receive_data(data)
            if not data:
                break
    assert isinstance(reply, Refused)
    assert f"this hub speaks link protocol {PROTOCOL_VERSION} and the agent 1" \
        in reply.reason
    assert hub.get("/api/health")["refused_agents"] == 1
    assert "agent 1: install the same raydebug version" in hub.stop_and_read_log()
