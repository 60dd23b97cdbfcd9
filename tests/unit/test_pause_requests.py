"""The agent's pause requests (``raydebug pause``), in memory: a thread is a session only once
it has suspended, where it stopped; a request that is abandoned ends without a word; one
withdrawn (cancelled, or expired) is taken back from pydevd, and the hub is told how many are
pending each time that changes."""

from __future__ import annotations

import sys
import threading
from collections.abc import Iterator
from types import FrameType
from typing import Any

import pytest

from raydebug.agent.agent import Agent
from raydebug.agent.config import AgentConfig
from raydebug.protocol.control import PausePending, SessionEnded, SessionStarted
from raydebug.session import PauseRequestEvent, PauseRequestState


class FakeDebugger:
    """What pause_all_threads asks of pydevd: the threads to pause, and whether each is
    still asked to (a resume of every thread cancels that)."""

    started = True  # pydevd runs: a pause is listed at once

    def __init__(self, threads: list[tuple[threading.Thread, FrameType]]) -> None:
        self.threads = threads
        self.asked: set[int] = set()
        self.resumed_all = False
        self.withdrawn: list[threading.Thread] = []
        self.was_withdrawn = threading.Event()
        self.blocked = FakeBlockedThreads()

    def ensure_started(self) -> None:
        pass

    def pausable_threads(self, skip: set[int]) -> list[tuple[threading.Thread, FrameType]]:
        return [(t, f) for t, f in self.threads if t.ident not in skip]

    def suspend_threads(self, threads: list[threading.Thread]) -> None:
        self.asked |= {t.ident for t in threads if t.ident is not None}

    def is_asked_to_pause(self, thread: threading.Thread) -> bool:
        return thread.ident in self.asked

    def is_suspended(self, ident: int) -> bool:
        return False

    def suspended_threads(self) -> set[int]:
        return set()

    def resume_all(self) -> None:
        self.resumed_all = True
        self.asked = set()

    def forget_client(self) -> None:
        pass

    def take_held_over(self) -> tuple[set[int], bool]:
        return set(), True

    def reconsider_tracing(self) -> None:
        pass

    def withdraw_pause(self, threads: list[threading.Thread]) -> None:
        self.withdrawn += threads
        self.asked -= {t.ident for t in threads}
        self.was_withdrawn.set()


class FakeBlockedThreads:
    """No thread is served where it blocks (``blocked_threads``), here."""

    def watch(self, threads: list[threading.Thread], still_asked: Any, let_go: Any) -> None:
        self.let_go = let_go

    def is_standing_in(self, ident: int) -> bool:
        return False

    def is_handing_over(self, ident: int) -> bool:
        return False


class FakeLink:
    hub_address = "hub:1"

    def __init__(self) -> None:
        self.posted: list[Any] = []

    def post(self, message: Any) -> None:
        self.posted.append(message)

    def sessions(self) -> list[Any]:
        """What was posted about sessions (not the pending count)."""
        return [m for m in self.posted if not isinstance(m, PausePending)]

    def pending(self) -> int:
        """The pending count the hub was told last."""
        counts = [m.threads for m in self.posted if isinstance(m, PausePending)]
        assert counts, "the hub was never told"
        return counts[-1]


class ListingLink(FakeLink):
    """A link of a pausing thread: its start does nothing, its first attempt has ended
    without an error, and it says when a session is listed."""

    last_error = None

    def __init__(self) -> None:
        super().__init__()
        self.listed = threading.Event()
        self.attempted = threading.Event()
        self.attempted.set()

    def post(self, message: Any) -> None:
        super().post(message)
        if isinstance(message, SessionStarted):
            self.listed.set()

    def start(self) -> None:
        pass

    def wait_sent(self, timeout: float) -> None:
        pass

    def take_first_error(self) -> None:
        return None

    def started_sessions(self) -> list[str]:
        return [m.session["id"] for m in self.posted if isinstance(m, SessionStarted)]


def _blocked() -> Iterator[tuple[threading.Thread, threading.Event]]:
    gate = threading.Event()
    thread = threading.Thread(target=gate.wait, name="blocked", daemon=True)
    thread.start()
    try:
        yield thread, gate
    finally:
        gate.set()
        thread.join(5)


blocked = pytest.fixture(_blocked)


def _agent(thread: threading.Thread) -> tuple[Agent, FakeDebugger, FakeLink]:
    agent = Agent(AgentConfig(hub_host="127.0.0.1", hub_port=1, token="t", wait_timeout=None))
    debugger = FakeDebugger([(thread, sys._current_frames()[thread.ident or 0])])
    link = FakeLink()
    agent.debugger = debugger  # type: ignore[assignment]
    agent.link = link  # type: ignore[assignment]
    return agent, debugger, link


def test_a_thread_is_a_session_only_once_it_stops_at_the_frame_it_stopped_in(blocked):
    thread, _gate = blocked
    agent, _debugger, link = _agent(thread)
    assert agent.pause_all_threads() == [thread.ident]
    assert link.sessions() == [] and agent.live_sessions() == []
    assert link.pending() == 1
    assert agent.pause_all_threads() == []  # asked already: not asked twice
    here = sys._getframe()
    line = here.f_lineno + 1  # the next line's: where this frame is when the thread stops
    agent._on_thread_suspended(thread.ident or 0, here)
    assert link.pending() == 0
    (started,) = link.sessions()
    assert isinstance(started, SessionStarted)
    record = started.session
    assert record["reason"] == "pause" and record["thread"] == "blocked"
    assert record["function"] == here.f_code.co_name and record["line"] == line
    assert [s.session["id"] for s in agent.live_sessions()] == [record["id"]]


def test_an_abandoned_pause_request_ends_without_a_word(blocked):
    thread, _gate = blocked
    agent, debugger, link = _agent(thread)
    agent.pause_all_threads()
    agent.on_client_attached()
    debugger.asked = set()  # the client's disconnect resumed every thread
    agent.on_client_detached()
    assert link.sessions() == [] and agent.live_sessions() == []
    assert link.pending() == 0
    assert agent.pause_all_threads() == [thread.ident]  # a later pause asks it again
    agent.on_hub_closing("node stopping")
    assert debugger.resumed_all  # the request is cancelled in pydevd too
    agent._on_thread_suspended(thread.ident or 0, sys._getframe())  # a stop not for us
    assert not any(isinstance(m, (SessionStarted, SessionEnded)) for m in link.posted)


def test_a_cancelled_request_is_taken_back_and_never_stops(blocked):
    thread, _gate = blocked
    agent, debugger, link = _agent(thread)
    agent.pause_all_threads()
    assert agent.withdraw_pauses() == 1
    assert debugger.withdrawn == [thread] and link.pending() == 0
    assert agent.withdraw_pauses() == 0  # nothing pending any more
    agent._on_thread_suspended(thread.ident or 0, sys._getframe())  # a stop not for us
    assert link.sessions() == [] and agent.live_sessions() == []


def test_a_request_not_met_in_time_expires(blocked):
    thread, _gate = blocked
    agent, debugger, link = _agent(thread)
    agent.pause_all_threads(expire=0.05)
    assert link.pending() == 1
    assert debugger.was_withdrawn.wait(5)
    assert debugger.withdrawn == [thread] and link.pending() == 0


def test_only_the_requests_of_one_ask_expire_with_it(blocked):
    thread, _gate = blocked
    agent, debugger, link = _agent(thread)
    agent.pause_all_threads()
    first = list(agent._pause_requests.values())
    agent._on_thread_suspended(thread.ident or 0, sys._getframe())  # it stopped: a session
    assert agent.withdraw_pauses(first, PauseRequestEvent.EXPIRED) == 0
    assert debugger.withdrawn == [] and len(link.sessions()) == 1


def test_a_clients_pause_asks_a_sessions_thread_it_let_run_and_asks_again_what_is_asked(
        blocked):
    thread, _gate = blocked
    agent, debugger, link = _agent(thread)
    agent.pause_all_threads()
    agent._on_thread_suspended(thread.ident or 0, sys._getframe())  # a session
    debugger.asked = set()  # the client continued it: the session goes on, running
    assert agent.pause_all_threads() == []  # raydebug pause leaves a session's thread be
    assert agent.pause_all_threads(expire=0.05, by_client=True) == [thread.ident]
    asked = agent._pause_requests[thread.ident or 0]
    assert debugger.asked == {thread.ident} and link.pending() == 1
    debugger.suspend_threads = lambda threads: again.extend(threads)  # type: ignore[method-assign]
    again: list[threading.Thread] = []
    assert agent.pause_all_threads(by_client=True) == [thread.ident]
    assert again == [thread]  # asked of pydevd again: an ask during a step's set-up is lost
    assert agent._pause_requests[thread.ident or 0] is asked  # the same request, its end kept
    assert debugger.was_withdrawn.wait(5) and debugger.withdrawn == [thread]


def test_a_cancel_lets_go_a_thread_served_blocked_in_c_and_an_expiry_does_not(blocked):
    thread, _gate = blocked
    agent, debugger, link = _agent(thread)
    agent.pause_all_threads()
    asked = list(agent._pause_requests.values())
    debugger.blocked.is_standing_in = lambda ident: True  # type: ignore[method-assign]
    debugger.is_suspended = lambda ident: True  # type: ignore[method-assign]  # its stand-in
    agent._on_thread_suspended(thread.ident or 0, sys._getframe())
    assert link.sessions()[-1].session["blocked_in_c"] is True and link.pending() == 1
    assert agent.withdraw_pauses(asked, PauseRequestEvent.EXPIRED) == 0  # it was served
    assert agent.withdraw_pauses() == 1  # raydebug pause --cancel: pending, as ps says
    assert debugger.withdrawn == [thread] and link.pending() == 0


def test_a_thread_in_c_that_runs_library_code_only_is_let_go_never_a_session(blocked):
    """Ray's PythonGCThread in its Event.wait: the blocked-thread watch finds no frame of
    the user's there and lets it go; its request is withdrawn, no session is made."""
    thread, _gate = blocked
    agent, debugger, link = _agent(thread)
    agent.pause_all_threads()
    (request,) = agent._pause_requests.values()
    debugger.blocked.let_go(thread)
    assert debugger.withdrawn == [thread] and link.pending() == 0
    assert request.state is PauseRequestState.CANCELLED
    assert link.sessions() == [] and agent.live_sessions() == []
