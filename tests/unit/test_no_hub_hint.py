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
