"""The agent's side of ``raydebug continue`` (the hub's ``Resume``), in memory: a paused
thread runs on, its session ended before the answer names it; with a client attached,
nothing is resumed and the answer says why. (A thread waiting in ``breakpoint()`` for a
debugger, and the whole path through a real hub: tests/integration/test_continue_command.py.)"""

from __future__ import annotations

import sys
import threading
from types import FrameType

from test_pause_requests import FakeDebugger, ListingLink, _agent, blocked  # noqa: F401 (a fixture)

from raydebug.agent.agent import Agent
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


class _ContinuedWhileStarting(FakeDebugger):
    """pydevd's start, during which the session is listed (it took longer than
    ``FIRST_LISTING_WAIT``) and the hub's ``Resume`` comes (a loaded node: seconds)."""

    started = False

    def __init__(self, thread: threading.Thread, link: ListingLink) -> None:
        super().__init__([(thread, sys._current_frames()[thread.ident or 0])])
        self.agent: Agent | None = None
        self.answer: Resumed | None = None
        self.stopped = False
        self.link = link

    def ensure_started(self) -> None:
        assert self.agent is not None
        assert self.link.listed.wait(10), "not listed while pydevd started"
        self.answer = self.agent.resume(Resume(request_id=3))

    def stop_here(self, frame: FrameType, under_client: bool = False) -> None:
        self.stopped = True  # a real pydevd would hold the thread here, unlisted


def test_a_continue_during_pydevds_start_lets_the_breakpoints_thread_run_on(blocked):  # noqa: F811
    """Found under load: a linked actor's method hit a cluster breakpoint, `raydebug
    continue` ended its session while pydevd was starting, and the thread then stopped in
    pydevd anyway: held for ever, listed nowhere, its job hung."""
    thread, _gate = blocked
    agent, _debugger, _link = _agent(thread)
    link = ListingLink()
    agent.link = link  # type: ignore[assignment]
    debugger = _ContinuedWhileStarting(thread, link)
    debugger.agent = agent
    agent.debugger = debugger  # type: ignore[assignment]

    agent.pause_at_breakpoint(sys._getframe())

    assert debugger.answer is not None and len(debugger.answer.sessions) == 1, debugger.answer
    assert not debugger.stopped
    assert agent.live_sessions() == []
    (started,) = [m for m in link.posted if isinstance(m, SessionStarted)]
    ended = [m.session_id for m in link.posted if isinstance(m, SessionEnded)]
    assert ended == [started.session["id"]]
