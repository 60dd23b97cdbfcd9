"""The hub's limits: one connection too many, a connection that never speaks, a session too
many, a message too large. Each refusal says which setting to change; the sessions already
there keep working."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from helpers import PAUSING_WORKER, finish, start_hub, write_script
from raydebug.protocol import NEED_DATA, frame
from raydebug.protocol.control import Challenge, ControlConnection, Welcome
from raydebug.protocol.handshake import AgentHandshake

pytestmark = pytest.mark.integration


def read_until_closed(sock: socket.socket) -> bytes:
    received = b""
    while chunk := sock.recv(65536):
        received += chunk
    return received


def test_one_worker_connection_too_many_is_refused(tmp_path: Path):
    with start_hub("--max-agent-connections", "2", "--handshake-timeout", "60") as hub:
        script = write_script(tmp_path, "worker.py", PAUSING_WORKER)
        first = hub.spawn(script)
        # Its control connection proved the token: it no longer counts toward the limit,
        # which is for connections that have not (a flood from one peer).
        [session] = hub.wait_sessions(1)
        with socket.create_connection(hub.worker, timeout=30) as idle, \
                socket.create_connection(hub.worker, timeout=30):  # 2 of 2, unproven
            err = hub.run_unserved(tmp_path)
            assert "refused us: too many connections to the hub's agent port from " \
                   "127.0.0.1 (limit 2; raise it with `raydebug hub " \
                   "--max-agent-connections`)" in err
            idle.sendall(b"\x00" * 64)  # garbage: the hub closes it, and counts it no more
            read_until_closed(idle)
        hub.attach_and_detach(session["id"])  # its data connection fits again
        code, out, _ = finish(first)
        assert code == 0 and "finished 42" in out
        assert "refused: too many connections" in hub.stop_and_read_log()


def test_one_client_connection_too_many_is_refused(tmp_path: Path):
    with start_hub("--max-client-connections", "2") as hub:
        proc = hub.spawn(write_script(tmp_path, "worker.py", PAUSING_WORKER))
        [session] = hub.wait_sessions(1)
        with socket.create_connection(hub.client, timeout=30) as idle, \
                socket.create_connection(hub.client, timeout=30):
            with pytest.raises(urllib.error.HTTPError) as refused:
                urllib.request.urlopen(f"http://{hub.client_address}/api/health", timeout=30)
            assert refused.value.code == 503
            assert json.loads(refused.value.read())["error"] == (
                "too many connections to the hub's client port from 127.0.0.1 (limit 2; "
                "raise it with `raydebug hub --max-client-connections`)")
            with socket.create_connection(hub.client, timeout=30) as dap:
                dap.sendall(frame(b'{"seq":1,"type":"request","command":"initialize"}'))
                assert b"raydebug hub: too many connections" in read_until_closed(dap)
            idle.sendall(b"\x00" * 64)
            read_until_closed(idle)
            assert hub.get("/api/health")["refused_clients_over_limit"] == 2
        hub.attach_and_detach(session["id"])
        code, out, _ = finish(proc)
        assert code == 0 and "finished 42" in out


def test_connections_that_never_speak_are_closed_after_the_idle_timeouts():
    with start_hub("--handshake-timeout", "0.5", "--client-idle-timeout", "0.5") as hub:
        started = time.monotonic()
        with socket.create_connection(hub.worker, timeout=30) as worker:
            stream = ControlConnection()
            stream.receive_data(read_until_closed(worker))
            assert isinstance(stream.next_event(), Challenge)  # then nothing from us: closed
        with socket.create_connection(hub.client, timeout=30) as client:
            assert read_until_closed(client) == b""
        with socket.create_connection(hub.client, timeout=30) as client:
            client.sendall(b"Content-")  # a first message begun, never finished
            assert read_until_closed(client) == b""
        assert time.monotonic() - started < 10  # not the 30 s socket timeout
        assert "no answer to the challenge within 0.5s" in hub.stop_and_read_log()


def test_a_session_too_many_is_refused_and_the_others_keep_working(tmp_path: Path):
    with start_hub("--max-sessions", "1") as hub:
        script = write_script(tmp_path, "worker.py", PAUSING_WORKER)
        first = hub.spawn(script)
        [session] = hub.wait_sessions(1)
        err = hub.run_unserved(tmp_path)
        assert "the hub holds 1 sessions already (raise it with `raydebug hub " \
               "--max-sessions`)" in err
        hub.attach_and_detach(session["id"])
        assert finish(first)[0] == 0


def test_a_worker_message_too_large_is_refused_and_logged():
    with start_hub() as hub:
        with socket.create_connection(hub.worker, timeout=30) as sock:
            shake = AgentHandshake(hub.token, "control")
            while (challenge := shake.next_event()) is NEED_DATA:
                shake.receive_data(sock.recv(65536))
            assert isinstance(challenge, Challenge)
            sock.sendall(shake.send())
            while (welcome := shake.next_event()) is NEED_DATA:
                shake.receive_data(sock.recv(65536))
            assert isinstance(welcome, Welcome)
            sock.sendall(b"Content-Length: 2000000\r\n\r\n")
            read_until_closed(sock)
        assert hub.get("/api/health")["status"] == "ok"
        assert "message of 2000000 bytes announced, limit is 1048576 bytes" \
            in hub.stop_and_read_log()


def test_the_hub_raises_its_open_file_limit_for_many_workers():
    """One socket per paused process: a soft limit of 1,024 (or less) would refuse the
    thousandth worker of a cluster, so a starting hub raises it towards its hard limit."""
    program = (
        "import asyncio, resource\n"
        "soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)\n"
        "resource.setrlimit(resource.RLIMIT_NOFILE, (256, hard))\n"
        "from raydebug.hub import Hub, HubConfig\n"
        "async def main():\n"
        "    hub = Hub(HubConfig(port=0, agent_port=0))\n"
        "    await hub.start()\n"
        "    await hub.close()\n"
        "asyncio.run(main())\n"
        "print(resource.getrlimit(resource.RLIMIT_NOFILE)[0], hard)\n")
    result = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True,
                            timeout=60)
    assert result.returncode == 0, result.stderr
    soft, hard = (int(word) for word in result.stdout.split())
    assert soft == min(65536, hard if hard >= 0 else 65536) and soft > 256
