"""Enabling raydebug in a runtime_env keeps everything the user put there."""

from __future__ import annotations

import sys

import pytest

pytest.importorskip("ray")

from raydebug.integrations import ray as ray_integration


@pytest.fixture(autouse=True)
def keep_breakpointhook():
    saved = sys.breakpointhook
    yield
    sys.breakpointhook = saved


def test_an_empty_runtime_env_gets_the_setup_hook():
    env = ray_integration.runtime_env(None)
    assert env["worker_process_setup_hook"] == ray_integration.SETUP_HOOK
    assert env["env_vars"] == {}


def test_the_users_runtime_env_is_kept(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("RAYDEBUG_POST_MORTEM", "1")
    user = {"env_vars": {"MINE": "1", "RAYDEBUG_POST_MORTEM": "0"}, "working_dir": "/src",
            "pip": ["requests"], "worker_process_setup_hook": "my.module.setup"}
    env = ray_integration.runtime_env(user)
    assert env["working_dir"] == "/src" and env["pip"] == ["requests"]
    assert env["env_vars"] == {"MINE": "1", "RAYDEBUG_POST_MORTEM": "0"}  # theirs wins
    hook = env["worker_process_setup_hook"]
    assert isinstance(hook, ray_integration.ChainedSetupHook)
    assert hook.user_hook == "my.module.setup"
    assert user["worker_process_setup_hook"] == "my.module.setup"  # not modified in place
    again = ray_integration.runtime_env(env)  # enabling twice changes nothing
    assert again["worker_process_setup_hook"] is hook


def test_a_chained_hook_runs_the_users_first_then_ours(monkeypatch: pytest.MonkeyPatch):
    calls = []
    monkeypatch.setattr(ray_integration, "setup_worker", lambda: calls.append("raydebug"))
    ray_integration.ChainedSetupHook(lambda: calls.append("user"))()
    assert calls == ["user", "raydebug"]


def test_the_runtime_env_hook_is_the_same_transformation():
    assert ray_integration.runtime_env_hook({"env_vars": {"A": "b"}})["env_vars"] == {"A": "b"}
