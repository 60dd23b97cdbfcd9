"""``raydebug pause``'s answers: the session it tells the user to attach to, and the hub it
asked when nothing matches."""

from __future__ import annotations

from typing import Any

import pytest
from click.testing import CliRunner

from raydebug.cli import live_commands
from raydebug.cli.live_commands import pause
from raydebug.cli.locate import HubLocation
from raydebug.errors import NoProcessMatchError

HUB = "127.0.0.1:5678"
GC_THREAD = {"id": "gc0000000001", "process": "p1", "thread": "PythonGCThread"}
MAIN_THREAD = {"id": "main00000001", "process": "p1", "thread": "MainThread"}


class SessionsOnTheHub:
    """The hub's sessions as a paused Ray worker's threads stop: its GC thread (blocked
    in C, served within a second) first, then its main thread. A long-poll for one more
    session is answered by the next stop."""

    def __init__(self) -> None:
        self.stops = [[GC_THREAD], [GC_THREAD, MAIN_THREAD]]
        self.now: list[dict[str, Any]] = []

    def list_sessions(self, hub: str, wait_for: int = 0, timeout: float = 0.0,
                      token: str | None = None) -> list[dict[str, Any]]:
        if wait_for or not self.now:
            self.now = self.stops.pop(0) if self.stops else self.now
        return self.now


@pytest.fixture
def hub(monkeypatch: pytest.MonkeyPatch) -> SessionsOnTheHub:
    sessions = SessionsOnTheHub()
    monkeypatch.setattr(live_commands, "locate_hub",
                        lambda hub, ray_address: HubLocation(HUB, "--hub"))
    monkeypatch.setattr(live_commands.hub_api, "pause",
                        lambda *args, **kwargs: {"paused": ["p1"]})
    monkeypatch.setattr(live_commands.hub_api, "list_sessions", sessions.list_sessions)
    return sessions


def test_pause_names_the_main_threads_session_not_the_first_to_stop(hub: SessionsOnTheHub):
    result = CliRunner().invoke(pause, ["task=queue_get"])

    assert result.exit_code == 0, result.output
    assert result.output == ("paused p1: session main00000001, gc0000000001 "
                             "(raydebug attach main00000001)\n")


def test_a_process_whose_main_thread_does_not_stop_is_named_by_its_other_session(
        hub: SessionsOnTheHub):
    hub.stops = [[GC_THREAD]]  # the main thread's session never comes

    result = CliRunner().invoke(pause, ["--wait", "0.2", "task=queue_get"])

    assert result.exit_code == 0, result.output
    assert result.output == "paused p1: session gc0000000001 (raydebug attach gc0000000001)\n"


def test_a_selector_that_matches_nothing_names_the_hub_asked(monkeypatch: pytest.MonkeyPatch):
    def match_nothing(*args: Any, **kwargs: Any) -> dict[str, Any]:
        raise NoProcessMatchError("no process matches pid=8463",
                                  ["p623dd55a pid 9353 on vm running"])

    monkeypatch.setattr(live_commands, "locate_hub", lambda hub, ray_address: HubLocation(
        HUB, "the hub started on this machine"))
    monkeypatch.setattr(live_commands.hub_api, "pause", match_nothing)

    result = CliRunner().invoke(pause, ["pid=8463"])

    assert result.exit_code == 1
    assert result.stderr.splitlines() == [
        "raydebug: no process matches pid=8463 on the hub at 127.0.0.1:5678 (the hub "
        "started on this machine)",
        "  p623dd55a pid 9353 on vm running"]


def test_a_line_wider_than_the_terminal_says_the_command_first_and_each_id_once(
        hub: SessionsOnTheHub, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(live_commands, "_stdout_width", lambda: 60, raising=False)

    result = CliRunner().invoke(pause, ["task=queue_get"])

    assert result.exit_code == 0, result.output
    assert result.output == "paused p1: raydebug attach main00000001 (also gc0000000001)\n"
