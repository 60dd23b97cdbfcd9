"""`raydebug COMMAND --help` in a narrow terminal: the examples fit, wrapped at words."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from raydebug.cli import cli
from raydebug.cli.help_format import fit_examples

EPILOG = ("Keys: pid, host.\n\n\b\nExamples:\n"
          "  raydebug stacks                     every thread of every process, merged\n"
          "  raydebug stacks rank=0-7            only these ranks\n"
          "  raydebug pause pid=4242 host=node-2\n"
          "  raydebug link --ray-address HEAD:6379 job=02000000\n"
          "                                      every worker of a Ray job, on every node")


def test_a_block_with_an_example_too_wide_has_each_description_below_wrapped_at_words():
    assert fit_examples(EPILOG, 56).split("\n") == [
        "Keys: pid, host.", "", "\b", "Examples:",
        "  raydebug stacks",
        "      every thread of every process, merged",
        "  raydebug stacks rank=0-7", "      only these ranks",
        "  raydebug pause pid=4242 host=node-2",
        "  raydebug link --ray-address HEAD:6379 job=02000000",
        "      every worker of a Ray job, on every node"]


def test_examples_that_fit_are_kept_as_written():
    assert fit_examples(EPILOG, 80) == EPILOG


@pytest.mark.parametrize("command", ["ps", "stacks", "pause", "continue", "link"])
def test_every_help_line_fits_60_columns(command):
    result = CliRunner().invoke(cli, [command, "--help"], terminal_width=60)
    assert result.exit_code == 0, result.output
    too_wide = [line for line in result.output.splitlines() if len(line) > 60]
    assert too_wide == []
    assert "Examples:" in result.output


def test_an_80_column_terminal_keeps_the_examples_that_fit_it_on_one_line():
    """click wraps its own text 2 columns short of a terminal it measures; an example that
    fits the terminal stays as written."""
    result = CliRunner(env={"COLUMNS": "80"}).invoke(cli, ["stacks", "--help"])
    assert result.exit_code == 0, result.output
    assert ("    raydebug stacks --native             those that do not answer read by py-spy"
            in result.output.splitlines()), result.output
    assert max(len(line) for line in result.output.splitlines()) <= 80
