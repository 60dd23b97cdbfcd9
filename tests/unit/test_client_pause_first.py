"""An attached client's DAP ``pause`` reaches pydevd on the data connection and the agent on
the control connection (``Pause(by_client)``), in either order: a thread pydevd suspends
before the agent hears of that pause is still listed, once, as a pause session. (Found
under load: test_pause_notices' spinner thread was suspended and never listed.)"""

from __future__ import annotations

import sys
import threading
from collections.abc import Iterator

import debugpy.server  # noqa: F401 (puts the vendored pydevd on sys.path)
import pytest
from _pydevd_bundle.pydevd_comm_constants import CMD_SET_BREAK, CMD_THREAD_SUSPEND
from test_pause_requests import FakeDebugger, FakeLink, _agent, blocked  # noqa: F401 (fixture)

from raydebug.agent.agent import Agent
from raydebug.agent.debugger.facade import Debugger
from raydebug.protocol.control import SessionStarted


class _Debugger(FakeDebugger):
    stopped_for_a_pause = staticmethod(Debugger.stopped_for_a_pause)

    def suspended_threads(self) -> set[int]:
        return {threading.get_ident()}  # this thread, suspended by pydevd


@pytest.fixture
def stop_reason() -> Iterator[threading.Thread]:
    """This thread, as pydevd marks a thread it suspends (its ``stop_reason``)."""
    here = threading.current_thread()
    yield here
    del here.stop_reason  # type: ignore[attr-defined]


def _client_attached(thread: threading.Thread) -> tuple[Agent, FakeLink]:
    """An agent with a client attached, whose pydevd has suspended this thread."""
    agent, _fake, link = _agent(thread)
    debugger = _Debugger([(threading.current_thread(), sys._getframe())])
    agent.debugger = debugger  # type: ignore[assignment]
    agent.on_client_attached()
    return agent, link


def test_a_thread_the_clients_pause_suspends_first_is_listed_once(blocked, stop_reason):  # noqa: F811
    agent, link = _client_attached(blocked[0])
    stop_reason.stop_reason = CMD_THREAD_SUSPEND  # type: ignore[attr-defined]

    agent._on_thread_suspended(threading.get_ident(), sys._getframe())  # before Pause

    (started,) = [m for m in link.posted if isinstance(m, SessionStarted)]
    assert started.session["reason"] == "pause"
    assert started.session["thread"] == stop_reason.name
    # The hub's word of the pause comes now: this thread is suspended, not asked again.
    agent.pause_all_threads(by_client=True)
    assert len([m for m in link.posted if isinstance(m, SessionStarted)]) == 1
    assert len(agent.live_sessions()) == 1


def test_a_stop_at_a_clients_breakpoint_is_not_made_a_pause(blocked, stop_reason):  # noqa: F811
    agent, link = _client_attached(blocked[0])
    stop_reason.stop_reason = CMD_SET_BREAK  # type: ignore[attr-defined]

    agent._on_thread_suspended(threading.get_ident(), sys._getframe())

    assert not [m for m in link.posted if isinstance(m, SessionStarted)]
    assert agent.live_sessions() == []
