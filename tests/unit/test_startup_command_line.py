"""Which interpreters the startup hook leaves alone: raydebug's own commands."""

from __future__ import annotations

import pytest

from raydebug.agent.startup import is_raydebug_command


@pytest.mark.parametrize("argv", [
    ["/venv/bin/python3", "/venv/bin/raydebug", "ps"],
    ["/venv/bin/python", "-m", "raydebug", "ps", "--json"],
    ["python", "-X", "importtime", "-m", "raydebug"],
    ["python", "-u", "/usr/local/bin/raydebug", "hub"],
])
def test_raydebug_commands_are_recognised(argv: list[str]):
    assert is_raydebug_command(argv)


@pytest.mark.parametrize("argv", [
    ["python", "job.py"],
    ["python", "-m", "raydebug_jobs"],
    ["python", "-m", "torch.distributed.run", "raydebug"],
    ["python", "-c", "import raydebug"],
    ["python", "-u", "train.py", "raydebug"],
    ["python"],
])
def test_other_programs_are_not(argv: list[str]):
    assert not is_raydebug_command(argv)
