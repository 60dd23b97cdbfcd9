"""A command run where no hub or Ray cluster was found says how to get one: the default
address, which nobody named, refuses (``attach`` is the README's first command)."""

from __future__ import annotations

import socket

import pytest
from click.testing import CliRunner

from raydebug.cli import sessions
from raydebug.cli.locate import HubLocation
from raydebug.errors import HubUnreachableError

HINT = ("no hub or Ray cluster was found on this machine: start one with `raydebug hub`, "
        "or pass --hub HOST:PORT or --ray-address")


@pytest.fixture
def nothing_found(monkeypatch: pytest.MonkeyPatch) -> str:
    """The address the commands fall back to, where nothing listens (a port just freed)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        address = f"127.0.0.1:{probe.getsockname()[1]}"
    monkeypatch.setattr(sessions, "locate_hub", lambda hub, ray_address: HubLocation(
        address, "the default address: no hub or Ray cluster was found on this machine",
        is_default=True))
    return address


@pytest.mark.parametrize("command", [sessions.attach, sessions.list_command])
def test_a_command_at_the_default_address_says_how_to_start_a_hub(nothing_found: str,
                                                                   command):
    result = CliRunner().invoke(command, [])

    assert isinstance(result.exception, HubUnreachableError), result.output
    assert str(result.exception) == (
        f"no hub at {nothing_found} (connection refused); {HINT}")


def test_link_where_no_hub_was_found_says_to_start_one(nothing_found: str, monkeypatch,
                                                       tmp_path) -> None:
    """`raydebug link pid=N` of a real Python process with no hub anywhere: not "the hub at
    ... was not started on this machine", which names a hub nobody found."""
    import subprocess
    import sys

    from raydebug.cli import link_command

    monkeypatch.setattr(link_command, "locate_hub", sessions.locate_hub)  # nothing_found's
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path))
    for name in ("RAYDEBUG_HUB", "RAYDEBUG_TOKEN", "RAYDEBUG_TOKEN_FILE"):
        monkeypatch.delenv(name, raising=False)
    waiting = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()"],
                               stdin=subprocess.PIPE)
    try:
        result = CliRunner().invoke(link_command.link, [f"pid={waiting.pid}"])
    finally:
        waiting.kill()
        waiting.wait(timeout=10)

    assert str(result.exception) == ("no hub was found on this machine: start one with "
                                     "`raydebug hub` (in another terminal), then link again")
