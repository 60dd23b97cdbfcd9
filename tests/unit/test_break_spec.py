"""``raydebug break``'s FILE:LINE [if CONDITION]: as separate words, or as the one quoted
word a shell user writes when the condition holds ``>``, ``<`` or ``(``."""

from __future__ import annotations

import os

import pytest

from raydebug.cli.breakpoints import parse_place, parse_spec, place_warning
from raydebug.errors import ConfigurationError


@pytest.mark.parametrize(("words", "expected"), [
    (("job.py:12",), ("job.py", 12, "")),
    (("job.py:12", "if", "i", "==", "3"), ("job.py", 12, "i == 3")),
    (("job.py:10 if item > 21",), ("job.py", 10, "item > 21")),
    (("job.py:10  if  len(rows) >= 2 and f(x) ",), ("job.py", 10, "len(rows) >= 2 and f(x)")),
    (("job.py:10\tif\tx < 1",), ("job.py", 10, "x < 1")),
    (("job.py:10 if x == ':3'",), ("job.py", 10, "x == ':3'")),
    (("my dir/a:b.py:3",), ("my dir/a:b.py", 3, "")),
    (("/abs/job.py:7 if", "x"), ("/abs/job.py", 7, "x")),
])
def test_a_breakpoint_in_words_or_in_one_quoted_word(words, expected):
    path, line, condition = expected
    assert parse_spec(words) == (os.path.abspath(path), line, condition)


@pytest.mark.parametrize(("words", "message"), [
    ((), "no breakpoint given"),
    (("job.py",), "'job.py' is not FILE:LINE"),
    (("job.py:0",), "'job.py:0' is not FILE:LINE"),
    (("job.py:12x",), "'job.py:12x' is not FILE:LINE"),
    (("job.py:12 when x",), "unexpected 'when' after job.py:12"),
    (("job.py:12", "if"), "`if` without a condition"),
    (("job.py:12 if ",), "`if` without a condition"),
])
def test_what_is_not_a_breakpoint_is_said_with_the_form_expected(words, message):
    with pytest.raises(ConfigurationError) as caught:
        parse_spec(words)
    assert str(caught.value).startswith(message)
    assert "expected FILE:LINE [if CONDITION]" in str(caught.value)


def test_remove_names_one_line_without_a_condition():
    assert parse_place("job.py:12") == (os.path.abspath("job.py"), 12)
    with pytest.raises(ConfigurationError, match="--remove takes FILE:LINE"):
        parse_place("job.py:12 if x > 1")


def test_a_file_missing_here_or_a_line_past_its_end_is_said_and_set_anyway(tmp_path):
    job = tmp_path / "job.py"
    job.write_text("a = 1\nb = 2\n")
    assert place_warning(str(job), 2) is None
    missing = place_warning(str(tmp_path / "nofile.py"), 3)
    assert missing is not None and missing.startswith(f"note: no {tmp_path / 'nofile.py'} ")
    assert "--local-root" in missing
    past = place_warning(str(job), 40)
    assert past is not None and "has 2 lines" in past and "line 40" in past
