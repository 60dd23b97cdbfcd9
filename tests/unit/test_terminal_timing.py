"""``raydebug attach``'s waits (:mod:`raydebug.terminal.timing`): their defaults when the
environment says nothing (the integration tests that would sit them out set them short),
what it may say instead, and what it may not."""

from __future__ import annotations

import pytest

from raydebug.errors import ConfigurationError
from raydebug.terminal import attach, running, timing


def test_the_defaults_when_the_environment_says_nothing():
    assert timing.seconds({}, "RAYDEBUG_RUNNING_HINT_AFTER",
                          timing.RUNNING_HINT_AFTER_DEFAULT) == 5.0
    assert timing.seconds({"RAYDEBUG_RECONNECT_FOR": " "}, "RAYDEBUG_RECONNECT_FOR",
                          timing.RECONNECT_FOR_DEFAULT) == 15.0


def test_the_commands_wait_as_the_module_read():
    assert running.RUNNING_HINT_AFTER is timing.RUNNING_HINT_AFTER
    assert attach.RECONNECT_FOR is timing.RECONNECT_FOR


def test_the_environment_may_say_other_seconds():
    assert timing.seconds({"RAYDEBUG_RECONNECT_FOR": "0.5"}, "RAYDEBUG_RECONNECT_FOR",
                          15.0) == 0.5


@pytest.mark.parametrize("text", ["soon", "0", "-1", "nan", "inf"])
def test_anything_but_a_positive_number_of_seconds_is_said(text: str):
    with pytest.raises(ConfigurationError) as raised:
        timing.seconds({"RAYDEBUG_RECONNECT_FOR": text}, "RAYDEBUG_RECONNECT_FOR", 15.0)
    assert str(raised.value) == (f"RAYDEBUG_RECONNECT_FOR={text!r} is not a positive "
                                 "number of seconds")
