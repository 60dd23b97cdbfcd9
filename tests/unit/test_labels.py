"""A process's labels: one reader, one rule, the same for a process and its sessions."""

from __future__ import annotations

import sys

import pytest

from raydebug.agent import metadata
from raydebug.agent.config import process_labels
from raydebug.agent.link import discovery, live

LABELLED = {"RANK": "3", "LOCAL_RANK": "1", "SLURM_PROCID": "7",
            "RAYDEBUG_LABELS": "team=vision, stage=old", "RAYDEBUG_LABEL_stage": "eval",
            "RAYDEBUG_LABEL_": "no key"}


def test_labels_keep_the_spelling_they_were_set_with_and_the_most_specific_wins():
    assert process_labels({**LABELLED, "PATH": "/bin"}) == {
        "RANK": "3", "LOCAL_RANK": "1", "SLURM_PROCID": "7", "team": "vision", "stage": "eval"}
    assert process_labels({}) == {}


def test_a_session_and_its_process_carry_the_same_labels(monkeypatch: pytest.MonkeyPatch):
    for name, value in LABELLED.items():
        monkeypatch.setenv(name, value)
    monkeypatch.delenv(discovery.RAY_TASK_VARIABLE, raising=False)
    session = metadata.record_for_frame(sys._getframe(), identity={})
    assert session.labels == live.process_record().labels == process_labels()
    assert (session.labels["RANK"], session.labels["stage"]) == ("3", "eval")
