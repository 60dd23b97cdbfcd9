"""raydebug's signal for a main thread blocked in C: it takes a real-time signal no one else
handles, brings the main thread back to Python with the frame it was in, and is never sent
to a handler that is not raydebug's. In this process (pytest's main thread), each test
putting the handlers back."""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from types import FrameType

import pytest

from raydebug.agent import pause_signal

pytestmark = pytest.mark.skipif(not hasattr(signal, "SIGRTMAX"), reason="no real-time signals")


@pytest.fixture
def fresh() -> Iterator[None]:
    """pause_signal as if never installed; every real-time handler put back afterwards."""
    signals = range(signal.SIGRTMIN, signal.SIGRTMAX + 1)
    saved = {number: signal.getsignal(number) for number in signals}
    pause_signal._signal = None
    try:
        yield
    finally:
        pause_signal._signal = None
        pause_signal.serve(lambda frame: None)
        for number, handler in saved.items():
            signal.signal(number, handler if handler is not None else signal.SIG_DFL)


def users_handler(signum: int, frame: FrameType | None) -> None:
    raise AssertionError("the user's handler was called")


def test_it_takes_the_highest_real_time_signal_no_one_handles(fresh):
    signal.signal(signal.SIGRTMAX, users_handler)  # the program's own: never replaced
    assert pause_signal.install() == signal.SIGRTMAX - 1
    assert signal.getsignal(signal.SIGRTMAX) is users_handler
    assert pause_signal.install() == signal.SIGRTMAX - 1  # once


def test_not_on_another_thread(fresh):
    found: list[int | None] = []
    thread = threading.Thread(target=lambda: found.append(pause_signal.install()))
    thread.start()
    thread.join(5)
    assert found == [None] and pause_signal.installed() is None


def test_the_blocked_main_thread_is_handed_to_the_agent_with_its_frame(fresh):
    pause_signal.install()
    frames: list[FrameType] = []
    woken = threading.Event()
    pause_signal.serve(lambda frame: (frames.append(frame), woken.set()))
    kicker = pause_signal.kick_main_thread(lambda: True, after=0)
    assert kicker is not None
    assert woken.wait(5)  # blocked in C here, until the handler ran on this thread
    kicker.join(5)
    assert frames and frames[0].f_code.co_filename.endswith("threading.py")


def test_a_signal_taken_by_the_program_is_never_sent(fresh):
    sent = pause_signal.install()
    assert sent is not None
    signal.signal(sent, users_handler)  # the program took it after raydebug
    kicker = pause_signal.kick_main_thread(lambda: True, after=0)
    assert kicker is not None
    kicker.join(5)
    assert not kicker.is_alive()
    sum(range(10))  # bytecode runs here: a pending handler would have run by now
