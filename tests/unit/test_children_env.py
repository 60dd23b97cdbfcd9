"""What a process started by a Ray task reads from its environment to reach the hub."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from raydebug.agent import metadata
from raydebug.agent.config import AgentConfig
from raydebug.agent.link import discovery
from raydebug.errors import ConfigurationError


def test_a_child_of_a_ray_worker_finds_the_hub_and_a_token_file(tmp_path: Path):
    token_file = tmp_path / "token"
    token_file.write_text("secret\n")
    environ = {"RAYDEBUG_CLUSTER_HUB": "10.0.0.2:7000", "RAYDEBUG_TOKEN_FILE": str(token_file)}
    config = AgentConfig.from_env(environ)
    assert (config.hub_host, config.hub_port, config.token) == ("10.0.0.2", 7000, "secret")
    # In a Ray worker the cluster is asked instead (the hub may move); an explicit hub wins.
    assert AgentConfig.from_env(environ, in_cluster=True).discover
    explicit = AgentConfig.from_env({**environ, "RAYDEBUG_HUB": "h:1", "RAYDEBUG_TOKEN": "t"})
    assert (explicit.hub_host, explicit.token) == ("h", "t")


@pytest.mark.parametrize("contents, error", [
    (None, r"RAYDEBUG_TOKEN_FILE='.*' cannot be read"),
    ("\n", r"RAYDEBUG_TOKEN_FILE='.*' is empty"),
])
def test_a_token_file_that_cannot_be_used_says_why(tmp_path: Path, contents: str | None,
                                                    error: str):
    token_file = tmp_path / "token"
    if contents is not None:
        token_file.write_text(contents)
    with pytest.raises(ConfigurationError, match=error):
        AgentConfig.from_env({"RAYDEBUG_CLUSTER_HUB": "h:1",
                              "RAYDEBUG_TOKEN_FILE": str(token_file)})
    with pytest.raises(ConfigurationError, match="RAYDEBUG_CLUSTER_HUB='h' is not host:port"):
        AgentConfig.from_env({"RAYDEBUG_CLUSTER_HUB": "h", "RAYDEBUG_TOKEN": "t"})


def test_a_childs_sessions_carry_the_identities_of_the_task_that_started_it(
        monkeypatch: pytest.MonkeyPatch):
    task = {"job_id": "02000000", "task_id": "abc", "task_name": "spawns", "attempt": 0,
            "parent_pid": 4242, "not_a_field": "dropped"}
    monkeypatch.setenv(discovery.RAY_TASK_VARIABLE, json.dumps(task))
    fields = metadata.ray_fields()
    assert fields == {"job_id": "02000000", "task_id": "abc", "task_name": "spawns",
                      "attempt": 0}
    assert metadata.session_labels()["parent_pid"] == "4242"
    monkeypatch.setenv(discovery.RAY_TASK_VARIABLE, "not json")
    assert metadata.ray_fields() == {} and "parent_pid" not in metadata.session_labels()


def test_an_environment_given_to_a_spawn_gets_the_current_task(
        monkeypatch: pytest.MonkeyPatch):
    children = pytest.importorskip("raydebug.integrations.ray.children")
    monkeypatch.setenv("RAYDEBUG_RAY_TASK", "now")
    monkeypatch.setenv("RAYDEBUG_CLUSTER_HUB", "h:2")
    copied = [b"PATH=/bin", b"RAYDEBUG_RAY_TASK=before", b"RAYDEBUG_CLUSTER_HUB=h:1"]
    refreshed = children._refreshed(copied)
    assert b"PATH=/bin" in refreshed and b"RAYDEBUG_RAY_TASK=now" in refreshed
    assert b"RAYDEBUG_CLUSTER_HUB=h:2" in refreshed and len(refreshed) == len(copied)
    own = [b"PATH=/bin"]  # made without raydebug's variables: left as the caller made it
    assert children._refreshed(own) is own


def test_a_worker_exports_the_hub_for_its_children(monkeypatch: pytest.MonkeyPatch,
                                                    tmp_path: Path):
    children = pytest.importorskip("raydebug.integrations.ray.children")
    monkeypatch.setattr(os, "environ", dict(os.environ))  # what the worker writes stays here
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path))
    for name in (*children.CHILD_VARIABLES, "RAYDEBUG_HUB"):
        monkeypatch.delenv(name, raising=False)
    from raydebug.integrations.ray.discovery import HubInfo

    hub = HubInfo(worker="10.0.0.1:7001", client="10.0.0.1:5678", token="cluster-secret",
                  owner="actor", node_ip="10.0.0.1", pid=1, cert="sha256:" + "ab" * 32)
    monkeypatch.setattr(children.ray, "is_initialized", lambda: True)
    from raydebug.integrations.ray import hub_actor  # (imported where a child is started)

    monkeypatch.setattr(hub_actor, "find_or_start_hub", lambda: hub)
    monkeypatch.setattr(children, "session_fields", lambda: {"task_id": "t1"})
    monkeypatch.setattr(children, "_hub_failed_at", None)
    children.prepare_children()

    child = AgentConfig.from_env(dict(os.environ))  # what a child of this worker reads
    assert (child.hub_host, child.hub_port, child.token) == ("10.0.0.1", 7001, "cluster-secret")
    assert child.hub_cert == hub.cert
    assert "cluster-secret" not in json.dumps(dict(os.environ))
    token_file = Path(os.environ["RAYDEBUG_TOKEN_FILE"])
    assert token_file.parent == tmp_path / "raydebug" and token_file.stat().st_mode & 0o77 == 0
    assert json.loads(os.environ["RAYDEBUG_RAY_TASK"]) == {"task_id": "t1",
                                                           "parent_pid": os.getpid()}
