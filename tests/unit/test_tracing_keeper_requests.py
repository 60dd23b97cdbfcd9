"""Which client requests wake the tracing keeper: not those that only look."""

from __future__ import annotations

import json
import threading

import pytest

from raydebug.agent.debugger.suspensions import Suspensions
from raydebug.agent.debugger.tracing_keeper import TracingKeeper


def request(command: str, **arguments: object) -> str:
    return json.dumps({"seq": 7, "type": "request", "command": command, "arguments": arguments})


@pytest.mark.parametrize(("raw", "wakes"), [
    (request("variables", variablesReference=3), False),
    (request("evaluate", expression='"command": "continue"'), False),  # a key in a string
    (request("stackTrace", threadId=1).encode(), False),  # pydevd may hand over bytes
    (request("continue", threadId=1), True),
    (request("setBreakpoints", breakpoints=[]), True),  # may remove the last one
    (request("disconnect"), True),
    ("not json at all", True),  # unknown: reconsider, to be safe
])
def test_only_requests_that_may_change_the_need_wake_the_keeper(raw: object, wakes: bool):
    keeper = TracingKeeper(threading.Lock(), Suspensions())
    keeper.after_request(raw)
    assert keeper._reconsider.is_set() is wakes
