"""What a new user reads when a script carries Ray's own debugger settings, or a cluster asks
for a token this machine does not have (the real thing: tests/integration/
test_ray_first_contact.py)."""

from __future__ import annotations

import sys

import pytest

pytest.importorskip("ray")

from raydebug.agent.link import discovery
from raydebug.integrations.ray import cluster_auth, enable

LINE = ("raydebug: RAY_DEBUG=1 and RAY_DEBUGGER_HOST=0.0.0.0 (Ray's own debugger) ignored: "
        "raydebug handles breakpoint() and no debugger listens beyond loopback; `raydebug "
        "list` shows what is paused")


@pytest.fixture(autouse=True)
def keep_breakpointhook():
    saved, saved_discovery = sys.breakpointhook, discovery.installed()
    enable._say_once.cache_clear()
    yield
    sys.breakpointhook = saved
    discovery.install(saved_discovery)


def test_rays_debugger_settings_in_the_drivers_environment_are_named():
    assert enable.ray_debugger_notice({"RAY_DEBUG": "1", "RAY_DEBUGGER_HOST": "0.0.0.0",
                                       "HOME": "/h"}, {}) == LINE


def test_rays_debugger_settings_in_the_jobs_env_vars_are_named():
    notice = enable.ray_debugger_notice({}, {"RAY_DEBUG": "legacy"})
    assert notice.startswith("raydebug: RAY_DEBUG=legacy (Ray's own debugger) ignored: ")


def test_no_notice_without_them_or_with_rays_debugger_off():
    assert enable.ray_debugger_notice({"PATH": "/bin"}, {"MINE": "1"}) == ""
    assert enable.ray_debugger_notice({"RAY_DEBUG": "0"}, {"RAY_DEBUGGER_HOST": ""}) == ""


def test_the_driver_says_it_once(monkeypatch: pytest.MonkeyPatch,
                                 capsys: pytest.CaptureFixture[str]):
    monkeypatch.setenv("RAY_DEBUG", "1")
    monkeypatch.setenv("RAY_DEBUGGER_HOST", "0.0.0.0")
    monkeypatch.setenv("RAYDEBUG_LIVE", "0")  # no link to start from this test's process
    enable.runtime_env(None)
    enable.runtime_env({"env_vars": {"MINE": "1"}})
    assert capsys.readouterr().err.splitlines() == [LINE]


@pytest.mark.parametrize(("mode", "why"), [
    (None, "no token was found (~/.ray/auth_token, RAY_AUTH_TOKEN_PATH or RAY_AUTH_TOKEN, "
           "as Ray's own clients look)"),
    ("token", "the token found (~/.ray/auth_token, RAY_AUTH_TOKEN_PATH or RAY_AUTH_TOKEN) "
              "is not this cluster's"),
    ("disabled", "RAY_AUTH_MODE=disabled is set"),
])
def test_a_refused_token_is_one_line_saying_where_it_goes(
        monkeypatch: pytest.MonkeyPatch, mode: str | None, why: str):
    if mode is None:
        monkeypatch.delenv("RAY_AUTH_MODE", raising=False)
    else:
        monkeypatch.setenv("RAY_AUTH_MODE", mode)
    error = cluster_auth.token_refused("127.0.0.1:6379")
    assert str(error) == (
        f"the Ray cluster at 127.0.0.1:6379 asks for its token and {why}: copy the token "
        "from the head node's ~/.ray/auth_token (`ray get-auth-token` there prints it)")
    assert error.address == "127.0.0.1:6379"
