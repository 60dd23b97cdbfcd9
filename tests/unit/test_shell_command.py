"""Hints name the raydebug command as the user's shell can run it."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from raydebug.shell_command import raydebug_command

VENV_BIN = Path(sys.executable).parent


@pytest.fixture
def no_raydebug_on_path(monkeypatch: pytest.MonkeyPatch) -> None:
    path = os.pathsep.join(folder for folder in os.environ.get("PATH", "").split(os.pathsep)
                           if not (Path(folder) / "raydebug").exists())
    monkeypatch.setenv("PATH", path)


def test_on_path_it_is_the_bare_name(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("PATH", str(VENV_BIN))
    assert raydebug_command() == "raydebug"


def test_off_path_it_is_the_venvs_script_relative_from_the_checkout(
        no_raydebug_on_path: None, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.chdir(VENV_BIN.parent.parent)
    assert raydebug_command() == os.path.join(VENV_BIN.parent.name, VENV_BIN.name, "raydebug")


def test_off_path_elsewhere_it_is_the_scripts_whole_path(
        no_raydebug_on_path: None, monkeypatch: pytest.MonkeyPatch, tmp_path: Path):
    monkeypatch.chdir(tmp_path)
    assert raydebug_command() == str(VENV_BIN / "raydebug")
