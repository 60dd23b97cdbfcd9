"""A process's first pause is listed once pydevd has started (a client attaching at once
then finds it ready), or ``FIRST_LISTING_WAIT`` after the pause began if the start takes
longer (a loaded node: seconds), never twice and never when the start failed; a later
pause, pydevd running, is listed at once. In memory: the agent with a pydevd whose start
the test holds. (The timing with a real pydevd: bench/core.py's first pause.)"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable, Iterator

import pytest
from test_pause_requests import FakeDebugger, ListingLink, _agent, blocked  # noqa: F401 (fixture)

from raydebug.agent import agent as agent_module
from raydebug.agent.agent import FIRST_LISTING_WAIT, Agent
from raydebug.protocol.control import Resume


class _Starting(FakeDebugger):
    """pydevd, started or not: a start runs ``start(link)`` (the test's), then it has
    started; ``listed_at_call`` says, for each call, whether the session was listed."""

    def __init__(self, thread: threading.Thread, link: ListingLink,
                 start: Callable[[ListingLink], None], started: bool) -> None:
        super().__init__([(thread, sys._current_frames()[thread.ident or 0])])
        self._link = link
        self._start = start
        self.started = started
        self.listed_at_call: list[bool] = []

    def ensure_started(self) -> None:
        self.listed_at_call.append(self._link.listed.is_set())
        if not self.started:
            self._start(self._link)
            self.started = True


Pause = Callable[..., tuple[Agent, ListingLink, _Starting]]


@pytest.fixture
def pausing(blocked) -> Iterator[Pause]:  # noqa: F811
    """Runs a cluster breakpoint's pause on a thread of its own, pydevd's start being
    ``start`` (``started``: pydevd already ran). At the end the pause is continued (the
    hub's ``Resume``) and its thread joined."""
    paused: list[tuple[Agent, threading.Thread]] = []

    def pause(start: Callable[[ListingLink], None], started: bool = False
              ) -> tuple[Agent, ListingLink, _Starting]:
        agent, _fake, _fake_link = _agent(blocked[0])
        link = ListingLink()
        agent.link = link  # type: ignore[assignment]
        debugger = _Starting(blocked[0], link, start, started)
        agent.debugger = debugger  # type: ignore[assignment]
        thread = threading.Thread(target=agent.pause_at_breakpoint, args=(sys._getframe(),),
                                  daemon=True)
        thread.start()
        paused.append((agent, thread))
        return agent, link, debugger

    yield pause
    for agent, thread in paused:
        agent.resume(Resume(request_id=1))
        thread.join(10)
        assert not thread.is_alive(), "the paused thread did not run on"


@pytest.fixture
def far_deadline(monkeypatch: pytest.MonkeyPatch) -> None:
    """A listing deadline no loaded machine reaches: what the test looks at is the start."""
    monkeypatch.setattr(agent_module, "FIRST_LISTING_WAIT", 60.0)


def _join_timers() -> None:
    """Wait for the listing's timer (cancelled, or due) to have ended."""
    for timer in [t for t in threading.enumerate() if isinstance(t, threading.Timer)]:
        timer.join(10)


def test_a_first_pause_is_listed_once_pydevd_has_started(pausing, far_deadline):
    gate = threading.Event()
    agent, link, debugger = pausing(lambda _link: gate.wait(10))
    seen_while_starting = agent.live_sessions()  # what a link connecting now would send
    gate.set()

    assert link.listed.wait(10)
    assert seen_while_starting == [] and debugger.listed_at_call == [False]
    assert len(link.started_sessions()) == 1
    assert [s.session["id"] for s in agent.live_sessions()] == link.started_sessions()
    _join_timers()
    assert len(link.started_sessions()) == 1  # its timer, cancelled, lists it no second time


def test_a_slow_start_is_listed_at_the_deadline_while_it_goes_on(pausing):
    waited: list[float] = []
    done = threading.Event()

    def start(link: ListingLink) -> None:  # longer than FIRST_LISTING_WAIT: until it is listed
        began = time.monotonic()
        link.listed.wait(10)
        waited.append(time.monotonic() - began)
        done.set()

    agent, link, _debugger = pausing(start)

    assert done.wait(10)
    _join_timers()
    assert waited and waited[0] >= FIRST_LISTING_WAIT * 0.5, waited
    assert len(link.started_sessions()) == 1  # once: the start's end does not list again
    assert len(agent.live_sessions()) == 1


def test_a_start_that_fails_before_the_deadline_is_never_listed(blocked, far_deadline):  # noqa: F811
    agent, _fake, _ = _agent(blocked[0])
    link = ListingLink()
    agent.link = link  # type: ignore[assignment]

    def fail(_link: ListingLink) -> None:
        raise RuntimeError("debugpy cannot start here")

    agent.debugger = _Starting(blocked[0], link, fail, False)  # type: ignore[assignment]

    with pytest.raises(RuntimeError, match="cannot start"):
        agent.pause_at_breakpoint(sys._getframe())
    _join_timers()  # cancelled: it ends without listing
    assert link.started_sessions() == []
    assert agent.live_sessions() == []


def test_a_later_pause_is_listed_at_once(pausing):
    agent, link, debugger = pausing(lambda _link: None, True)

    assert link.listed.wait(10)
    assert debugger.listed_at_call == [True]  # pydevd ran: listed before anything else
    assert len(link.started_sessions()) == 1
    assert len(agent.live_sessions()) == 1
