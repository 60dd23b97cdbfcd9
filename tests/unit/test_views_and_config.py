"""What the CLI renders, and how the agent reads its environment."""

from __future__ import annotations

import json

import pytest
from rich.console import Console

from raydebug import views
from raydebug.agent.config import CI_WAIT_TIMEOUT, AgentConfig, parse_address
from raydebug.errors import ConfigurationError

SESSION = {"id": "abc123", "state": "waiting", "host": "node-1", "pid": 42,
           "file": "/srv/job/train.py", "line": 17, "function": "step",
           "reason": "exception", "exception": "ValueError: bad", "since": 1000.0,
           "labels": {"rank": "3"}}


def render(table: object) -> str:
    console = Console(width=200, record=True, color_system=None)
    console.print(table)
    return console.export_text()


def test_sessions_table_shows_what_a_user_needs():
    text = render(views.sessions_table([SESSION], now=1075.0))
    assert "1 paused session(s)" in text
    for expected in ("abc123", "waiting", "node-1", "42", "/srv/job/train.py:17 in step",
                     "exception: ValueError: bad", "1m15s", "rank=3"):
        assert expected in text


def test_list_warns_about_refused_connections():
    assert views.hub_warnings({"refused_clients_over_limit": 0, "refused_workers": 0}) == []
    assert views.hub_warnings({"refused_clients_over_limit": 7, "refused_workers": 2,
                               "client_connections": {"limit": 64}}) == [
        "the hub refused 7 client connection(s) over its limit of 64 per address (raise it "
        "with `raydebug hub --max-client-connections`)",
        "the hub refused 2 worker connection(s): a wrong token, or over `raydebug hub "
        "--max-worker-connections` (see the hub's log)"]


def test_vscode_config_is_the_stock_debugpy_attach():
    config = views.vscode_config("127.0.0.1", 5678, session="abc")
    assert config["type"] == "debugpy" and config["request"] == "attach"
    assert config["connect"] == {"host": "127.0.0.1", "port": 5678}
    assert config["raydebug"] == {"session": "abc"}


def test_launch_json_keeps_other_configurations_and_replaces_ours():
    existing = """{
        // a comment VS Code allows
        "version": "0.2.0",
        "configurations": [
            {"name": "mine", "type": "python", "url": "http://x//y"},
            {"name": "raydebug: attach to the cluster", "old": true},
        ],
    }"""
    merged = json.loads(views.merge_launch_json(existing, views.vscode_config("h", 1)))
    names = [c["name"] for c in merged["configurations"]]
    assert names == ["mine", "raydebug: attach to the cluster"]
    assert merged["configurations"][0]["url"] == "http://x//y"  # strings are left alone
    assert "old" not in merged["configurations"][1]
    assert views.has_comments(existing)
    with pytest.raises(ValueError):
        views.merge_launch_json("[1, 2]", views.vscode_config("h", 1))


def test_agent_config_from_environment():
    config = AgentConfig.from_env({"RAYDEBUG_HUB": "10.0.0.1:5679", "RAYDEBUG_TOKEN": "t",
                                   "RAYDEBUG_WAIT_TIMEOUT": "2.5"})
    assert (config.hub_host, config.hub_port, config.wait_timeout) == ("10.0.0.1", 5679, 2.5)
    ci = AgentConfig.from_env({"RAYDEBUG_HUB": "h:1", "RAYDEBUG_TOKEN": "t", "CI": "true"})
    assert ci.wait_timeout == CI_WAIT_TIMEOUT
    forever = AgentConfig.from_env({"RAYDEBUG_HUB": "h:1", "RAYDEBUG_TOKEN": "t"})
    assert forever.wait_timeout is None and forever.hub_cert is None
    pinned = AgentConfig.from_env({"RAYDEBUG_HUB": "h:1", "RAYDEBUG_TOKEN": "t",
                                   "RAYDEBUG_HUB_CERT": "AB:" * 31 + "AB"})
    assert pinned.hub_cert == "sha256:" + "ab" * 32
    assert parse_address("[::1]:80", "x") == ("::1", 80)


@pytest.mark.parametrize("environ, error", [
    ({}, "RAYDEBUG_HUB is not set"),
    ({"RAYDEBUG_HUB": "nohost"}, "is not host:port"),
    ({"RAYDEBUG_HUB": "h:99999", "RAYDEBUG_TOKEN": "t"}, "is not host:port"),
    ({"RAYDEBUG_HUB": "h:1"}, "RAYDEBUG_TOKEN is not set"),
    ({"RAYDEBUG_HUB": "h:1", "RAYDEBUG_TOKEN": "t", "RAYDEBUG_WAIT_TIMEOUT": "soon"},
     "not a number"),
    ({"RAYDEBUG_HUB": "h:1", "RAYDEBUG_TOKEN": "t", "RAYDEBUG_HUB_CERT": "/no/such.pem"},
     "RAYDEBUG_HUB_CERT='/no/such.pem' is neither a SHA-256"),
])
def test_agent_config_errors_name_the_variable(environ: dict[str, str], error: str):
    with pytest.raises(ConfigurationError, match=error):
        AgentConfig.from_env(environ)


def test_vscode_command_writes_launch_json_and_keeps_a_backup(tmp_path):
    from click.testing import CliRunner

    from raydebug.cli import cli

    launch = tmp_path / ".vscode" / "launch.json"
    launch.parent.mkdir()
    launch.write_text('{"configurations": [{"name": "mine"}] // comment\n}')
    result = CliRunner().invoke(cli, ["vscode", "--write", "--workspace", str(tmp_path),
                                      "--hub", "127.0.0.1:6000"])
    assert result.exit_code == 0, result.output
    written = json.loads(launch.read_text())
    assert [c["name"] for c in written["configurations"]] == [
        "mine", "raydebug: attach to the cluster"]
    assert written["configurations"][1]["connect"]["port"] == 6000
    assert (tmp_path / ".vscode" / "launch.json.bak").read_text().endswith("// comment\n}")
