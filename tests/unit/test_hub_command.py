"""``raydebug hub``: what its help says of the client port is what the hub does, and the
worker token it keeps for the next hub on the same address (mode 0600)."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest
from click.testing import CliRunner

from raydebug import state_file
from raydebug.cli import cli
from raydebug.errors import ConfigurationError
from raydebug.hub import Hub, HubConfig


def option_help(text: str, option: str) -> str:
    """The help of ``option`` in ``--help``'s text, on one line."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.strip().startswith(option + " "))
    words = [lines[start].strip().split(None, 2)[2]]
    for line in lines[start + 1:]:
        if line.strip().startswith("-"):
            break
        words.append(line.strip())
    return " ".join(words)


def test_the_help_on_the_client_port_says_what_the_hub_does():
    text = CliRunner().invoke(cli, ["hub", "--help"], terminal_width=200).output
    host, client_token = option_help(text, "--host"), option_help(text, "--client-token")
    assert "loopback only" not in host.lower()  # not with a client token
    assert "a loopback address, or any with --client-token" in host
    assert "Needed for a --host that is not loopback" in client_token
    # ... and so it is:
    with pytest.raises(ConfigurationError, match="without a client token"):
        Hub(HubConfig(host="0.0.0.0", port=0, worker_port=0))
    Hub(HubConfig(host="0.0.0.0", port=0, worker_port=0, client_token="secret"))


def test_a_hubs_token_is_kept_by_worker_address_in_a_private_file(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path))
    assert state_file.saved_token("127.0.0.1:5679") is None
    state_file.save_token("127.0.0.1:5679", "first")
    state_file.save_token("10.0.0.5:5679", "other")
    state_file.save_token("127.0.0.1:5679", "second")
    assert state_file.saved_token("127.0.0.1:5679") == "second"
    assert state_file.saved_token("10.0.0.5:5679") == "other"
    saved = tmp_path / "raydebug" / "hub-tokens.json"
    assert stat.S_IMODE(saved.stat().st_mode) == 0o600
    for port in range(state_file.KEPT_TOKENS):  # the oldest address goes first
        state_file.save_token(f"127.0.0.1:{10000 + port}", "t")
    assert state_file.saved_token("10.0.0.5:5679") is None
    assert state_file.saved_token(f"127.0.0.1:{10000 + state_file.KEPT_TOKENS - 1}") == "t"
    saved.write_text("not json")
    assert state_file.saved_token("127.0.0.1:10000") is None
