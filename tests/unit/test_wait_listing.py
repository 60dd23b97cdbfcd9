"""devtools' wait on a hub's long-poll (``wait_listing``), against a hub stand-in on a fake
clock: each poll asks the hub to wait no longer than the client waits for its answer, so a
wait that runs out ends in the ``TimeoutError`` naming what was waited for."""

from __future__ import annotations

import re
from typing import Any

import pytest

from devtools import long_poll


class StandInHub:
    """Answers ``GET /api/processes`` as the hub does when nothing changes: at once without
    ``after``, else when the poll's ``timeout`` has run out (the clock moves on by it). A
    client that gives up on its socket before that gets what urllib raises then."""

    def __init__(self) -> None:
        self.now = 1000.0
        self.polls: list[tuple[float, float]] = []  # (hub's wait, client's socket timeout)

    def monotonic(self) -> float:
        return self.now

    def urlopen(self, url: str, timeout: float) -> Any:
        asked = re.search(r"[?&]timeout=([0-9.]+)", url)
        wait = float(asked.group(1)) if asked and "after=" in url else 0.0
        self.polls.append((wait, timeout))
        if wait >= timeout:
            self.now += timeout
            raise TimeoutError("timed out")  # the socket's, as in the integration run
        self.now += wait
        return Answer()


class Answer:
    headers = {"Raydebug-Version": "4"}

    def __enter__(self) -> Answer:
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    def read(self) -> bytes:
        return b"[]"


@pytest.fixture
def hub(monkeypatch: pytest.MonkeyPatch) -> StandInHub:
    stand_in = StandInHub()
    monkeypatch.setattr("devtools.long_poll.time.monotonic", stand_in.monotonic)
    monkeypatch.setattr("devtools.long_poll.urllib.request.urlopen", stand_in.urlopen)
    return stand_in


def test_a_slow_check_leaves_the_hub_no_longer_wait_than_the_client(hub: StandInHub) -> None:
    def slow_check(answer: Any) -> None:
        hub.now += 5.0  # `raydebug list` on a loaded machine, between two polls
        return None

    with pytest.raises(TimeoutError, match="the method's session: not within 180 s"):
        long_poll.wait_listing("127.0.0.1:1", "/api/processes?now=0", "the method's session",
                               slow_check, timeout=180)
    assert all(wait < socket for wait, socket in hub.polls), hub.polls
    assert hub.polls[-1][0] == 0.0  # the last look, after the deadline, waits for nothing


def test_a_change_ends_the_wait_with_the_checks_value(hub: StandInHub) -> None:
    answers = iter([None, None, "found"])
    assert long_poll.wait_listing("127.0.0.1:1", "/api/sessions", "a session",
                                  lambda answer: next(answers), timeout=30) == "found"
    assert hub.polls[0][0] == 0.0  # the first poll waits for nothing
    assert all(wait < socket for wait, socket in hub.polls), hub.polls
