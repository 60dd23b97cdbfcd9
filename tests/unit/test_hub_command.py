"""``raydebug hub``: what its help says of the client port is what the hub does, the agents'
port's name (and its old one), and the token it keeps for the next hub on the same address
(mode 0600)."""

from __future__ import annotations

import stat
from pathlib import Path
from typing import Any

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
        Hub(HubConfig(host="0.0.0.0", port=0, agent_port=0))
    Hub(HubConfig(host="0.0.0.0", port=0, agent_port=0, client_token="secret"))


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


def run_hub_command(monkeypatch: pytest.MonkeyPatch, *args: str) -> tuple[int, str, Any]:
    """``raydebug hub ARGS`` up to the hub it would serve (returned unstarted), its exit
    code and output."""
    from raydebug.cli import hub_command

    served: list[Any] = []

    async def keep(hub: Any, ray_integration: Any = None, token_kept: bool = False) -> None:
        served.append(hub)

    monkeypatch.setattr(hub_command, "_serve_hub", keep)
    result = CliRunner().invoke(cli, ["hub", "--token", "t", *args])
    return result.exit_code, result.output, served[0] if served else None


def test_the_agents_port_is_agent_port_and_worker_port_its_hidden_old_name(
        monkeypatch: pytest.MonkeyPatch) -> None:
    text = CliRunner().invoke(cli, ["hub", "--help"], terminal_width=200).output
    assert "--agent-port" in text and "--agent-host" in text
    assert "--worker-port" not in text and "--worker-host" not in text
    code, _, hub = run_hub_command(monkeypatch, "--agent-host", "10.0.0.7",
                                   "--agent-port", "6001")
    assert code == 0 and (hub.config.agent_host, hub.config.agent_port) == ("10.0.0.7", 6001)
    code, _, hub = run_hub_command(monkeypatch, "--worker-host", "10.0.0.8",
                                   "--worker-port", "6002")
    assert code == 0 and (hub.config.agent_host, hub.config.agent_port) == ("10.0.0.8", 6002)
    code, _, hub = run_hub_command(monkeypatch)
    assert code == 0 and (hub.config.agent_host, hub.config.agent_port) == ("127.0.0.1", 5679)
    code, output, hub = run_hub_command(monkeypatch, "--agent-port", "6001",
                                        "--worker-port", "6002")
    assert code == 2 and hub is None
    assert "--worker-port is the old name of --agent-port: give one of them" in output


def test_the_agents_connection_limit_keeps_its_old_name_hidden(
        monkeypatch: pytest.MonkeyPatch) -> None:
    text = CliRunner().invoke(cli, ["hub", "--help"], terminal_width=200).output
    assert "--max-agent-connections" in text and "--max-worker-connections" not in text
    code, _, hub = run_hub_command(monkeypatch, "--max-agent-connections", "7")
    assert code == 0 and hub.config.max_agent_connections == 7
    code, _, hub = run_hub_command(monkeypatch, "--max-worker-connections", "8")
    assert code == 0 and hub.config.max_agent_connections == 8
    code, _, hub = run_hub_command(monkeypatch)
    assert code == 0 and hub.config.max_agent_connections == 1_000
    code, output, hub = run_hub_command(monkeypatch, "--max-agent-connections", "7",
                                        "--max-worker-connections", "8")
    assert code == 2 and hub is None
    assert "--max-worker-connections is the old name of --max-agent-connections" in output


def test_a_port_in_use_is_named_with_what_to_do():
    from raydebug.cli.hub_command import cannot_listen

    taken = OSError(98, "error while attempting to bind on address ('127.0.0.1', 5678): "
                        "address already in use")
    said = cannot_listen(taken)
    assert said.startswith("cannot listen on 127.0.0.1:5678: the address is in use "
                           "(another hub? `")
    assert said.endswith(" list` names the hub it finds); --port and --agent-port pick "
                         "other ports (0: any free one)")
    other = OSError(99, "error while attempting to bind on address ('10.9.9.9', 5678): "
                        "cannot assign requested address")
    assert cannot_listen(other) == ("cannot listen: error while attempting to bind on "
                                    "address ('10.9.9.9', 5678): cannot assign requested "
                                    "address")
