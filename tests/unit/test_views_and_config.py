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


def render(table: object, width: int = 200) -> str:
    console = Console(width=width, record=True, color_system=None)
    console.print(table)
    return console.export_text()


RAY_SESSIONS = [
    {"id": "9183533b7182", "state": "waiting", "host": "head", "pid": 18321,
     "file": "/tmp/ray/session_2026-12-01_09-03-24_801426_7405/runtime_resources/"
             "working_dir_files/_ray_pkg_5a1b2c3d4e5f/helper.py",
     "line": 36, "function": "double", "reason": "breakpoint", "since": 1000.0, "labels": {},
     "task_name": "pause", "node_ip": "10.0.0.7", "job_id": "01000000"},
    {"id": "a183533b7183", "state": "attached", "host": "head", "pid": 18322,
     "file": "/srv/project/trainer/train.py", "line": 136, "function": "step",
     "reason": "exception", "exception": "ZeroDivisionError: division by zero",
     "since": 1010.0, "labels": {}, "task_name": "Trainer.step", "node_ip": "10.0.0.8",
     "job_id": "01000000"},
]


def test_sessions_table_shows_what_a_user_needs():
    text = render(views.sessions_table([SESSION], now=1075.0, hub="127.0.0.1:5678"))
    assert "1 paused session on the hub at 127.0.0.1:5678" in text
    for expected in ("abc123", "waiting", "node-1", "42", "/srv/job/train.py:17", "step",
                     "ValueError: bad", "1m15s", "rank=3"):
        assert expected in text


def test_list_warns_about_refused_connections():
    assert views.hub_warnings({"refused_clients_over_limit": 0, "refused_agents": 0}) == []
    assert views.hub_warnings({"refused_clients_over_limit": 7, "refused_agents": 2,
                               "client_connections": {"limit": 64}}) == [
        "the hub refused 7 client connection(s) over its limit of 64 per address (raise it "
        "with `raydebug hub --max-client-connections`)",
        "the hub refused 2 agent connection(s): a wrong token, or over `raydebug hub "
        "--max-agent-connections` (see the hub's log)"]


@pytest.mark.parametrize("width", [120, 80, 60])
def test_a_ray_session_is_one_line_that_fits_the_terminal(width: int):
    text = render(views.sessions_table(RAY_SESSIONS, now=1075.0, width=width,
                                       hub="127.0.0.1:5678"), width)
    lines = text.rstrip("\n").splitlines()
    assert len(lines) == 2 + len(RAY_SESSIONS), text  # title, header, one line a session
    assert all(len(line.rstrip()) <= width for line in lines), text
    header = lines[1].split()
    assert header[:2] == ["id", "task"] and "pid" in header and "where" in header, text
    assert "labels" not in header and "job" not in header, text  # empty, or all the same
    for session, line in zip(RAY_SESSIONS, lines[2:], strict=True):
        assert session["id"] in line and str(session["pid"]) in line, text
        assert session["task_name"] in line, text
        # shortened from the left: the file name and line stay
        assert f"{session['file'].rsplit('/', 1)[1]}:{session['line']}" in line, text
    if width >= 80:
        assert "node" in header and "10.0.0.7" in lines[2] and "age" in header, text
        assert "breakpoint" in lines[2] and "ZeroDivis" in lines[3], text
    if width >= 120:
        assert "ZeroDivisionError: division" in lines[3] and "attached" in lines[3], text


def test_the_job_column_appears_when_sessions_come_from_several_jobs():
    sessions = [RAY_SESSIONS[0], {**RAY_SESSIONS[1], "job_id": "02000000"}]
    text = render(views.sessions_table(sessions, now=1075.0, width=160), 160)
    assert "job" in text.splitlines()[1].split() and "02000000" in text


def test_an_empty_list_says_so_and_where_it_looked():
    text = render(views.sessions_table([], hub="127.0.0.1:5678",
                                       found_by="the hub of the Ray cluster at 127.0.0.1:6379"))
    assert text.strip() == ("no sessions on the hub at 127.0.0.1:5678 (the hub of the Ray "
                            "cluster at 127.0.0.1:6379): nothing is paused")


def test_vscode_config_names_the_local_root_for_the_hub_to_map():
    config = views.vscode_config("127.0.0.1", 5678, local_root="/home/me/code")
    assert config["raydebug"] == {"localRoot": "/home/me/code"}
    assert "pathMappings" not in config  # the hub maps paths: no _ray_pkg_<hash> to go stale


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


@pytest.mark.parametrize("width", [120, 60])
def test_the_threads_of_one_paused_process_are_told_apart(width: int):
    """`raydebug pause` of a threaded actor: one session per thread, the same task, node and
    pid on every line; only the thread says which is the main loop and which a call."""
    threads = [dict(SESSION, id=f"s{n}", reason="pause", exception=None, labels={},
                    thread=name) for n, name in enumerate(("MainThread", "Dummy-1"))]
    text = render(views.sessions_table(threads, now=1075.0, width=width), width)
    header = next(line for line in text.splitlines() if line.startswith("id "))
    assert "thread" in header.split(), text
    assert "MainThread" in text and "Dummy-1" in text, text
    single = render(views.sessions_table([dict(SESSION, thread="MainThread")], now=1075.0))
    assert "MainThread" not in single  # one session a process: nothing to tell apart


def test_at_80_columns_file_names_stay_whole_and_what_all_share_is_said_once():
    """Sessions of one node with long paths (a Ray job's working_dir): the where column keeps
    each file name and line (paths shortened from the left); the node, the same on every
    row, is said once above the table instead of taking a column."""
    same_node = [{**RAY_SESSIONS[0], "node_ip": "10.0.0.7"},
                 {**RAY_SESSIONS[1], "node_ip": "10.0.0.7"},
                 {**RAY_SESSIONS[0], "id": "c2f0e2a1b9d4", "line": 1204,
                  "task_name": "preprocess_records", "file": "/home/user/project/src/"
                  "pipeline/preprocess_records.py"}]
    text = render(views.sessions_table(same_node, now=1075.0, width=80,
                                       hub="127.0.0.1:5678"), 80)
    lines = text.rstrip("\n").splitlines()
    assert lines[0] == "3 paused sessions on the hub at 127.0.0.1:5678; all: node 10.0.0.7"
    header = lines[1].split()
    assert "node" not in header and "10.0.0.7" not in "".join(lines[1:]), text
    assert all(len(line) <= 80 for line in lines), text
    for session, line in zip(same_node, lines[2:], strict=True):
        assert f"/{session['file'].rsplit('/', 1)[1]}:{session['line']}" in line, text
    one = render(views.sessions_table(same_node[:1], now=1075.0, width=80), 80)
    assert "node" in one.splitlines()[1].split()  # one row: nothing is shared by "all"


def test_what_all_share_takes_a_line_of_its_own_when_the_title_is_full():
    sessions = [dict(SESSION, id=f"s{n}", labels={}, line=17 + n) for n in range(3)]
    lines = render(views.sessions_table(sessions, now=1075.0, width=60,
                                        hub="127.0.0.1:5678"), 60).splitlines()
    assert lines[:2] == ["3 paused sessions on the hub at 127.0.0.1:5678",
                         "all: node node-1, reason ValueError: bad, state waiting"]
    assert lines[2].split() == ["id", "function", "pid", "where", "age"], lines
