"""The agent's side of ``raydebug continue`` (the hub's ``Resume``), in memory: a paused
thread runs on, its session ended before the answer names it; with a client attached,
nothing is resumed and the answer says why. (A thread waiting in ``breakpoint()`` for a
debugger, and the whole path through a real hub: tests/integration/test_continue_command.py.)"""

from __future__ import annotations

import sys

from test_pause_requests import _agent, blocked  # noqa: F401 (a fixture)

from raydebug.protocol.control import Resume, Resumed, SessionEnded, SessionStarted


def test_a_paused_thread_runs_on_and_its_session_ends_before_the_answer(blocked):  # noqa: F811
    thread, _gate = blocked
    agent, debugger, link = _agent(thread)
    agent.pause_all_threads()
    agent._on_thread_suspended(thread.ident or 0, sys._getframe())  # raydebug pause's stop
    (started,) = [m for m in link.posted if isinstance(m, SessionStarted)]
    session_id = started.session["id"]

    answer = agent.resume(Resume(request_id=7))

    assert answer == Resumed(request_id=7, sessions=[session_id])
    assert debugger.resumed_all
    assert [m.session_id for m in link.posted if isinstance(m, SessionEnded)] == [session_id]
    assert agent.live_sessions() == []
    assert agent.resume(Resume(request_id=8)) == Resumed(request_id=8)  # nothing left


def test_with_a_client_attached_nothing_is_resumed(blocked):  # noqa: F811
    thread, _gate = blocked
    agent, debugger, _link = _agent(thread)
    agent.pause_all_threads()
    agent._on_thread_suspended(thread.ident or 0, sys._getframe())
    agent.on_client_attached()

    answer = agent.resume(Resume(request_id=9))

    assert isinstance(answer, Resumed) and answer.sessions == []
    assert "a client is attached" in answer.error
    assert not debugger.resumed_all and len(agent.live_sessions()) == 1
