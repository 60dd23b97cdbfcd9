"""The agent's table of the hub's control messages (:class:`ControlDispatch`), through its
seams: an owner that records what it is asked, and the answers it sends."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from raydebug.agent.link.dispatch import ControlDispatch
from raydebug.protocol.control import (
    CancelPause,
    CollectStacks,
    ControlMessage,
    Pause,
    PauseCancelled,
    Paused,
)


class Owner:
    def __init__(self) -> None:
        self.asked: list[ControlMessage] = []

    def pause(self, message: Pause) -> Paused:
        self.asked.append(message)
        return Paused(request_id=message.request_id)

    def cancel_pause(self, message: CancelPause) -> PauseCancelled:
        self.asked.append(message)
        return PauseCancelled(request_id=message.request_id, threads=0)

    def collect_stacks(self, message: CollectStacks) -> Any:
        self.asked.append(message)
        return Paused(request_id=message.request_id)  # any answer: not looked at here


def dispatch(owner: Owner, answers: list[ControlMessage]) -> ControlDispatch:
    data = SimpleNamespace(open=print, on_client_ready=print, on_client_gone=print)
    return ControlDispatch(owner, data, answers.append, print, print)  # type: ignore[arg-type]


def test_a_pause_withdrawn_in_the_same_read_is_answered_not_carried_out():
    owner, answers = Owner(), []
    dispatch(owner, answers).handle_read(
        [Pause(request_id=7, expire_ms=5000), CollectStacks(request_id=8),
         CancelPause(request_id=0)], lambda: True)
    assert owner.asked == [CollectStacks(request_id=8), CancelPause(request_id=0)]
    assert answers[0] == Paused(request_id=7, error="withdrawn before this process read it")


def test_a_pause_read_alone_or_before_its_withdrawal_was_read_is_carried_out():
    owner, answers = Owner(), []
    handle = dispatch(owner, answers)
    handle.handle_read([CancelPause(request_id=3), Pause(request_id=4)], lambda: True)
    handle.handle_read([Pause(request_id=5)], lambda: True)
    assert owner.asked == [CancelPause(request_id=3), Pause(request_id=4), Pause(request_id=5)]
    assert all(not getattr(answer, "error", "") for answer in answers)


def test_nothing_is_handled_once_the_connection_was_dropped():
    owner, answers = Owner(), []
    dispatch(owner, answers).handle_read([Pause(request_id=1)], lambda: False)
    assert owner.asked == [] and answers == []
