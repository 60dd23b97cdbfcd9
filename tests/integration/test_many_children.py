"""One IDE debugs more processes than the per-address connection limit: a cluster session's
children do not count toward it once attached; a refusal is said in the IDE's console."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from cluster_ide import ClusterIde
from helpers import PAUSING_WORKER, HubProcess, finish, run, start_hub, write_script
from raydebug.client.dap import DapClient

pytestmark = pytest.mark.integration

OLD_LIMIT = 64  # --max-client-connections' default


@pytest.mark.timeout(400)
def test_one_cluster_attach_debugs_more_processes_than_the_connection_limit(
        hub: HubProcess, tmp_path: Path):
    script = write_script(tmp_path, "worker.py", PAUSING_WORKER)
    count = OLD_LIMIT + 6
    # Started at once (each pause costs ~0.2 s of CPU); none may wait forever.
    procs = [hub.spawn(script, RAYDEBUG_WAIT_TIMEOUT="180") for _ in range(count)]
    hub.wait_sessions(count, timeout=150)

    async def scenario() -> None:
        ide = ClusterIde(hub)
        await ide.attach()
        await ide.wait_children(count, timeout=120)
        assert {s["state"] for s in hub.get("/api/sessions")} == {"attached"}
        health = hub.get("/api/health")
        assert health["refused_clients_over_limit"] == 0
        connections = health["client_connections"]
        assert connections["vouched"] == count  # the children
        assert connections["counted"] <= 2  # the parent, and this HTTP request
        for child, thread_id in ide.children:
            await child.request("continue", {"threadId": thread_id})
            await child.request("disconnect", {})
        await ide.close()

    run(scenario(), timeout=300)
    for proc in procs:
        code, out, err = finish(proc, timeout=60)
        assert code == 0 and "finished 42" in out, err
    assert hub.get("/api/health")["client_connections"]["vouched"] == 0


def test_a_refused_connection_is_said_in_the_cluster_sessions_console(tmp_path: Path):
    with start_hub("--max-client-connections", "3") as hub:
        proc = hub.spawn(write_script(tmp_path, "worker.py", PAUSING_WORKER),
                         RAYDEBUG_WAIT_TIMEOUT="60")
        hub.wait_sessions(1)

        async def scenario() -> None:
            ide = ClusterIde(hub)
            await ide.attach()  # 1 of 3
            assert ide.parent is not None
            offer = await ide.parent.wait_reverse_request("startDebugging")
            idle = [socket.create_connection(hub.client, timeout=30) for _ in range(2)]  # 3/3
            # The IDE opens its child: one connection too many.
            child = await DapClient.connect(*hub.client)
            said = await ide.parent.wait_event("output", timeout=30)
            assert said.body["output"] == (
                "raydebug hub: refused a connection: too many connections to the hub's "
                "client port from 127.0.0.1 (limit 3; raise it with `raydebug hub "
                "--max-client-connections`)\n")
            await child.close()
            for sock in idle:  # garbage: the hub closes them, and counts them no more
                sock.sendall(b"\x00" * 64)
                while sock.recv(65536):
                    pass
                sock.close()
            # With room again, the child attaches; then it no longer counts.
            configuration = dict(offer.arguments["configuration"])
            configuration.pop("request")
            child = await DapClient.connect(*hub.client)
            await child.initialize()
            await child.attach(**configuration)
            health = hub.get("/api/health")
            assert health["refused_clients_over_limit"] == 1
            assert health["client_connections"]["vouched"] == 1
            listed = subprocess.run(
                [sys.executable, "-m", "raydebug", "list", "--hub", hub.client_address],
                capture_output=True, text=True, timeout=60, env={**os.environ, "COLUMNS": "300"})
            assert "the hub refused 1 client connection(s) over its limit of 3 per address " \
                   "(raise it with `raydebug hub --max-client-connections`)" in listed.stdout
            await child.request("disconnect", {})
            await child.close()
            await ide.close()

        run(scenario())
        code, out, err = finish(proc)
        assert code == 0 and "finished 42" in out, err
        assert "refused: too many connections to the hub's client port" in \
            hub.stop_and_read_log()
