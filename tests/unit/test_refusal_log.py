"""The hub's log of refused agent connections: a process holding an old token retries
every few seconds for as long as it waits, and each retry must not be a line."""

from __future__ import annotations

import logging

import pytest

from raydebug.hub.agents.listener import RefusalLog

WRONG = "wrong token: set RAYDEBUG_TOKEN to the token `raydebug hub` printed"


def test_one_line_per_host_and_reason_then_one_a_minute_with_the_count(
        caplog: pytest.LogCaptureFixture) -> None:
    now = [0.0]
    refusals = RefusalLog(clock=lambda: now[0], interval=60.0)
    with caplog.at_level(logging.WARNING, logger="raydebug.hub"):
        for second in range(0, 50, 5):  # 10 retries in 45 s, each from a new port
            now[0] = float(second)
            refusals.refused(f"10.0.0.5:{40000 + second}", "10.0.0.5", WRONG)
        refusals.refused("10.0.0.6:40000", "10.0.0.6", WRONG)  # another host: said
        refusals.refused("10.0.0.5:41000", "10.0.0.5", "another reason")  # said
        now[0] = 61.0
        refusals.refused("10.0.0.5:42000", "10.0.0.5", WRONG)
    assert [record.getMessage() for record in caplog.records] == [
        f"agent 10.0.0.5:40000: refused: {WRONG}",
        f"agent 10.0.0.6:40000: refused: {WRONG}",
        "agent 10.0.0.5:41000: refused: another reason",
        f"agent 10.0.0.5:42000: refused: {WRONG} (and 9 more from 10.0.0.5 since the last "
        "said)",
    ]
