"""Enabling raydebug in a runtime_env keeps everything the user put there."""

from __future__ import annotations

import dataclasses
import sys

import pytest

pytest.importorskip("ray")

from raydebug.agent.link import discovery
from raydebug.agent.link.discovery import HubAddress, LocalDiscovery
from raydebug.integrations import ray as ray_integration
from raydebug.integrations.ray import enable


@pytest.fixture(autouse=True)
def keep_breakpointhook():
    saved, saved_discovery = sys.breakpointhook, discovery.installed()
    yield
    sys.breakpointhook = saved
    discovery.install(saved_discovery)


def test_an_empty_runtime_env_gets_the_setup_hook():
    env = ray_integration.runtime_env(None)
    assert env["worker_process_setup_hook"] == ray_integration.SETUP_HOOK
    assert env["env_vars"] == {"RAYDEBUG_LIVE": "ray"}  # workers link at start


def test_the_users_runtime_env_is_kept(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("RAYDEBUG_POST_MORTEM", "1")
    user = {"env_vars": {"MINE": "1", "RAYDEBUG_POST_MORTEM": "0"}, "working_dir": "/src",
            "pip": ["requests"], "worker_process_setup_hook": "my.module.setup"}
    env = ray_integration.runtime_env(user)
    assert env["working_dir"] == "/src" and env["pip"] == ["requests"]
    assert env["env_vars"] == {"MINE": "1", "RAYDEBUG_POST_MORTEM": "0",  # theirs wins
                               "RAYDEBUG_LIVE": "ray"}
    hook = env["worker_process_setup_hook"]
    assert isinstance(hook, ray_integration.ChainedSetupHook)
    assert hook.user_hook == "my.module.setup"
    assert user["worker_process_setup_hook"] == "my.module.setup"  # not modified in place
    again = ray_integration.runtime_env(env)  # enabling twice changes nothing
    assert again["worker_process_setup_hook"] is hook


def test_a_chained_hook_runs_the_users_first_then_ours(monkeypatch: pytest.MonkeyPatch):
    calls = []
    monkeypatch.setattr(enable, "setup_worker", lambda: calls.append("raydebug"))
    ray_integration.ChainedSetupHook(lambda: calls.append("user"))()
    assert calls == ["user", "raydebug"]


def test_the_runtime_env_hook_is_the_same_transformation():
    assert ray_integration.runtime_env_hook({"env_vars": {"A": "b"}})["env_vars"] == {
        "A": "b", "RAYDEBUG_LIVE": "ray"}


def test_hub_info_carries_the_certificate_workers_pin():
    info = ray_integration.HubInfo(worker="10.0.0.1:5679", client="127.0.0.1:5678", token="t",
                                   owner="cli", node_ip="10.0.0.1", pid=1, cert="sha256:ab")
    assert ray_integration.HubInfo.from_json(info.to_json()) == info
    older = b'{"worker": "w:1", "client": "c:2", "token": "t", "owner": "actor", ' \
            b'"node_ip": "w", "pid": 1}'  # published by a hub without TLS support
    assert ray_integration.HubInfo.from_json(older).cert == ""


def test_enabling_a_driver_gives_the_agent_rays_discovery(monkeypatch: pytest.MonkeyPatch):
    discovery.install(LocalDiscovery())
    ray_integration.runtime_env(None)
    installed = discovery.installed()
    assert isinstance(installed, ray_integration.RayDiscovery)
    # Before ray.init (or in a fork child) it answers as a process a task started.
    monkeypatch.setenv("RAYDEBUG_RAY_TASK", '{"task_id": "t1", "parent_pid": 7}')
    assert not installed.in_cluster()
    assert installed.process_identity() == {"task_id": "t1"}


def test_the_agent_dials_the_published_worker_address_and_pins_its_certificate():
    info = ray_integration.HubInfo(worker="10.0.0.1:5679", client="127.0.0.1:5678", token="t",
                                   owner="actor", node_ip="10.0.0.1", pid=1, cert="sha256:ab")
    assert info.address() == HubAddress("10.0.0.1", 5679, "t", "sha256:ab")
    assert dataclasses.replace(info, cert="").address().cert is None


def test_raydebug_live_0_turns_the_live_link_off(monkeypatch):
    monkeypatch.setenv("RAYDEBUG_LIVE", "0")
    assert ray_integration.runtime_env()["env_vars"]["RAYDEBUG_LIVE"] == "0"


def test_raydebug_run_no_live_reaches_the_driver():
    import subprocess
    import sys

    code = "import os; print(os.environ.get('RAYDEBUG_LIVE'))"
    for flags, expected in (((), "None"), (("--no-live",), "0")):
        shown = subprocess.run([sys.executable, "-m", "raydebug", "run", *flags, "--",
                                sys.executable, "-c", code], capture_output=True, text=True,
                               timeout=60, check=True)
        assert shown.stdout.strip() == expected, shown


def test_snapshots_are_asked_for_every_worker(monkeypatch: pytest.MonkeyPatch):
    import raydebug

    env = raydebug.runtime_env({"env_vars": {"MINE": "1"}}, snapshots=True)
    assert env["env_vars"] == {"MINE": "1", "RAYDEBUG_SNAPSHOTS": "1", "RAYDEBUG_LIVE": "ray"}
    monkeypatch.setenv("RAYDEBUG_SNAPSHOTS", "1")  # `raydebug run --snapshots`'s driver
    assert ray_integration.runtime_env(None)["env_vars"]["RAYDEBUG_SNAPSHOTS"] == "1"
