"""A client token: needed to listen beyond loopback, and then required of every client."""

from __future__ import annotations

import json
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from helpers import finish, run, start_hub, write_script
from raydebug.client.dap import DapClient, DapRequestError

pytestmark = pytest.mark.integration

WORKER = """
breakpoint()
print("finished", flush=True)
"""


def test_no_listener_beyond_loopback_without_a_client_token():
    result = subprocess.run([sys.executable, "-m", "raydebug", "hub", "--host", "0.0.0.0",
                             "--port", "0", "--agent-port", "0"], capture_output=True,
                            text=True, timeout=60)
    assert result.returncode == 1
    assert "refusing to serve debug clients on 0.0.0.0 without a client token" in result.stderr
    assert "Traceback" not in result.stderr


def test_with_a_client_token_clients_without_it_are_refused(tmp_path: Path):
    hub = start_hub("--client-token", "s3cret")
    try:
        proc = hub.spawn(write_script(tmp_path, "worker.py", WORKER))
        url = f"http://{hub.client_address}/api/sessions?min=1&timeout=30"
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(url, timeout=40)
        assert refused.value.code == 401
        assert "client token" in json.loads(refused.value.read())["error"]
        request = urllib.request.Request(url, headers={"Authorization": "Bearer s3cret"})
        with urllib.request.urlopen(request, timeout=40) as response:
            [session] = json.loads(response.read())

        cli = [sys.executable, "-m", "raydebug", "list", "--hub", hub.client_address]
        without = subprocess.run(cli, capture_output=True, text=True, timeout=60)
        assert without.returncode == 1 and "client token" in without.stderr
        wrong = subprocess.run([*cli, "--client-token", "wrong"], capture_output=True,
                               text=True, timeout=60)
        assert wrong.returncode == 1, wrong.stderr
        # one line that says what is wrong, in the user's words (no URL, no HTTP status)
        [line] = wrong.stderr.strip().splitlines()
        assert "the client token given is not this hub's" in line, line
        assert "http://" not in line and "HTTP" not in line, line
        with_token = subprocess.run([*cli, "--client-token", "s3cret", "--json"],
                                    capture_output=True, text=True, timeout=60)
        assert json.loads(with_token.stdout)[0]["id"] == session["id"]

        async def attach() -> None:
            refused_client = await DapClient.connect(*hub.client)
            await refused_client.initialize()
            with pytest.raises(DapRequestError, match="requires its client token"):
                await refused_client.attach(session["id"], raydebug={"token": "wrong"})
            await refused_client.close()
            client = await DapClient.connect(*hub.client)
            await client.initialize()
            await client.attach(session["id"], raydebug={"token": "s3cret"})
            await client.request("disconnect", {})
            await client.close()

        run(attach())
        assert finish(proc)[0] == 0
    finally:
        hub.close()
