"""Ray's driver folds log lines that differ only in numbers: under `raydebug run` every
pause notice of every worker still reaches the driver (issue: only the first was shown)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from raydebug.cli.run_command import never_fold

pytest.importorskip("ray")

from ray._private.ray_logging import LogDeduplicator

NOTICES = [f"raydebug: session {sid} paused at /srv/job.py:{line}, waiting for a debugger "
           f"(hub: 10.0.0.{n}:5679)" for n, (sid, line) in
           enumerate([("9183533b7182", 36), ("77a1c0de4f11", 36), ("0be11e7fa2c3", 41)])]


def shown(allow: str | None, lines: list[str]) -> list[str]:
    """What Ray's deduplicator lets through of ``lines`` from three workers."""
    dedup = LogDeduplicator(5, allow, None, _timesource=lambda: 0)
    out = []
    for pid, line in enumerate(lines, start=100):
        for batch in dedup.deduplicate({"ip": "10.0.0.1", "pid": pid, "lines": [line]}):
            out.extend(batch["lines"])
    return out


def test_ray_folds_the_notices_without_the_allow_pattern():
    assert len(shown(None, NOTICES)) < len(NOTICES)  # what users saw


def test_every_notice_reaches_the_driver_and_a_users_own_pattern_still_applies():
    assert shown(never_fold(None), NOTICES) == NOTICES
    mine = [f"epoch {n} done" for n in range(3)]
    assert shown(never_fold("epoch"), NOTICES + mine) == NOTICES + mine


def test_raydebug_run_gives_the_driver_the_pattern():
    env = {**os.environ, "RAY_DEDUP_LOGS_ALLOW_REGEX": "epoch"}
    out = subprocess.run(
        [sys.executable, "-m", "raydebug", "run", "--", sys.executable, "-c",
         "import os; print(os.environ['RAY_DEDUP_LOGS_ALLOW_REGEX'])"],
        env=env, capture_output=True, text=True, timeout=60, check=True).stdout.strip()
    assert out == never_fold("epoch").strip() == "(?:epoch)|raydebug:"  # (print + strip)
