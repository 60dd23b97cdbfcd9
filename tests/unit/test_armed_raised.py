"""In memory: which raises the ``raised`` filter stops at (one per raise, in the first frame
of user code the exception reaches, never in a library's nor for control flow), and how the
armed set hands them on (a fake backend: nothing installed in the interpreter)."""

from __future__ import annotations

import json
import os
import sys
from types import FrameType, TracebackType
from typing import Any

from raydebug.agent.armed.breakpoints import ArmedBreakpoints, BreakpointSet
from raydebug.agent.armed.raised import is_library, stops_here


class Reports:
    """What a backend would report: each (frame, exception, traceback) a raise passes."""

    def __init__(self) -> None:
        self.seen: list[tuple[FrameType, BaseException, TracebackType | None]] = []

    def trace(self, frame: FrameType, event: str, arg: Any) -> Any:
        if event == "exception":
            self.seen.append((frame, arg[1], arg[2]))
        return self.trace

    def run(self, function: Any) -> None:
        sys.settrace(self.trace)
        try:
            function()
        finally:
            sys.settrace(None)


def inner() -> None:
    raise ValueError("inner")


def outer() -> None:
    inner()


def test_a_raise_stops_once_where_it_was_raised_not_in_the_callers() -> None:
    reports = Reports()

    def caught() -> None:
        try:
            outer()
        except ValueError:
            pass

    reports.run(caught)
    stops = [frame.f_code.co_name for frame, exc, tb in reports.seen
             if stops_here(frame, exc, tb)]
    assert [frame.f_code.co_name for frame, _, _ in reports.seen] == [
        "inner", "outer", "caught"]  # the trace function reports it in every frame
    assert stops == ["inner"]


def test_a_librarys_exception_stops_in_the_first_user_frame_it_reaches() -> None:
    reports = Reports()

    def decode() -> None:
        try:
            json.loads("{")  # raised inside json, comes out here
        except ValueError:
            pass

    reports.run(decode)
    stops = [frame.f_code.co_name for frame, exc, tb in reports.seen
             if stops_here(frame, exc, tb)]
    assert stops == ["decode"]


def test_raised_and_caught_inside_a_library_or_control_flow_never_stops() -> None:
    reports = Reports()

    def quiet() -> None:
        os.environ.get("RAYDEBUG_NO_SUCH_VARIABLE")  # a KeyError raised and caught in os
        for _ in iter([1]):
            pass
        try:
            raise StopIteration
        except StopIteration:
            pass

    reports.run(quiet)
    assert reports.seen  # os's KeyError and our StopIteration were reported
    assert not [f for f, exc, tb in reports.seen if stops_here(f, exc, tb)]
    assert is_library(os.__file__) and is_library("<string>")
    assert not is_library(__file__)


class FakeBackend:
    shares_trace_function = False

    def __init__(self) -> None:
        self.installed: Any = None

    def install(self, armed: Any) -> None:
        self.installed = armed

    def remove(self) -> None:
        self.installed = None

    def active(self) -> bool:
        return self.installed is not None

    def forget_after_fork(self) -> None:
        self.remove()


def test_the_filter_arms_alone_and_hands_each_stop_to_on_raised() -> None:
    backend = FakeBackend()
    raised: list[str] = []
    arm = ArmedBreakpoints(on_hit=lambda frame: None, on_log=lambda text, frame: None,
                           backend=backend,
                           on_raised=lambda frame, exc, tb: raised.append(str(exc)))
    arm.arm(BreakpointSet.from_wire({"exceptions": ["raised"]}))
    assert backend.active() and arm.raised
    reports = Reports()

    def caught() -> None:
        try:
            outer()
        except ValueError:
            pass

    reports.run(caught)
    assert [arm.on_raise(*report) for report in reports.seen] == [True, False, False]
    assert raised == ["inner"]
    arm.arm(BreakpointSet.from_wire({"exceptions": ["uncaught"]}))  # not ours to arm
    assert not backend.active()
    assert arm.on_raise(*reports.seen[0]) is False
