"""`raydebug list --json` naming its hub is served before click is imported
(cli/list_json.py); every other command line is click's, and says the same."""

from __future__ import annotations

import socket
import subprocess
import sys

import pytest

from raydebug.cli.list_json import quick_arguments

HUB = "127.0.0.1:5678"


@pytest.mark.parametrize(("argv", "hub", "token"), [
    (["list", "--json", "--hub", HUB], HUB, None),
    (["list", "--hub", HUB, "--json"], HUB, None),
    (["list", "--json", f"--hub={HUB}", "--client-token", "s3cret"], HUB, "s3cret"),
    (["list", "--hub", "a:1", "--json", "--hub", HUB], HUB, None),  # the last wins, as in click
])
def test_a_plain_list_json_naming_its_hub_is_served_without_click(argv, hub, token,
                                                                  monkeypatch):
    monkeypatch.delenv("RAYDEBUG_CLIENT_ADDRESS", raising=False)
    monkeypatch.delenv("RAYDEBUG_CLIENT_TOKEN", raising=False)
    assert quick_arguments(argv) == {"--hub": hub, "--client-token": token}


def test_the_hub_and_token_may_come_from_their_environment_variables(monkeypatch):
    monkeypatch.setenv("RAYDEBUG_CLIENT_ADDRESS", HUB)
    monkeypatch.setenv("RAYDEBUG_CLIENT_TOKEN", "s3cret")
    assert quick_arguments(["list", "--json"]) == {"--hub": HUB, "--client-token": "s3cret"}
    monkeypatch.setenv("RAYDEBUG_CLIENT_ADDRESS", "")  # empty: unset, as click reads it
    assert quick_arguments(["list", "--json"]) is None


@pytest.mark.parametrize("argv", [
    ["list", "--hub", HUB],  # the table
    ["list", "--json"],  # the hub to be found (state file, Ray)
    ["list", "--json", "--hub", HUB, "--wait", "2"],
    ["list", "--json", "--hub", HUB, "--ray-address", "auto"],
    ["list", "--json", "--hub", HUB, "--help"],
    ["list", "--json", "--hub"],  # click says what is missing
    ["list", "--json", "--hub", "--client-token", "x"],
    ["list", "--json", "--hub="],
    ["ps", "--json", "--hub", HUB],
    [],
])
def test_any_other_command_line_is_clicks(argv, monkeypatch):
    monkeypatch.delenv("RAYDEBUG_CLIENT_ADDRESS", raising=False)
    assert quick_arguments(argv) is None


def test_served_without_click_it_fails_as_click_says_it_and_imports_no_click():
    with socket.socket() as probe:  # a port just freed: refused
        probe.bind(("127.0.0.1", 0))
        hub = f"127.0.0.1:{probe.getsockname()[1]}"
    script = ("import sys; from raydebug.__main__ import run\n"
              "try:\n    run()\n"
              "finally:\n    print('click' in sys.modules)")
    quick = subprocess.run([sys.executable, "-c", script, "list", "--json", "--hub", hub],
                           capture_output=True, text=True, timeout=60)
    through_click = subprocess.run(  # --wait 0: the same question, asked through click
        [sys.executable, "-c", script, "list", "--json", "--hub", hub, "--wait", "0"],
        capture_output=True, text=True, timeout=60)
    assert (quick.returncode, quick.stdout) == (1, "False\n"), quick
    assert (through_click.returncode, through_click.stdout) == (1, "True\n"), through_click
    assert quick.stderr == through_click.stderr == \
        f"raydebug: no hub at {hub} (connection refused)\n"
