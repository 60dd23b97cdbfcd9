"""``raydebug break``'s FILE:LINE [if CONDITION]: as separate words, or as the one quoted
word a shell user writes when the condition holds ``>``, ``<`` or ``(``."""

from __future__ import annotations

import os

import pytest

from raydebug.cli.breakpoints import parse_place, parse_spec
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
