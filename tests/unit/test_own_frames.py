"""Which frames a user is shown: the debugger's (raydebug's, pydevd's) cut from the top of a
stack, with the standard library's they called; the user's code and libraries kept."""

from __future__ import annotations

import functools
import os
import sys
import sysconfig
from types import FrameType

from raydebug.agent.own_frames import RAYDEBUG_DIR, is_debugger_file, user_top

USER = os.path.abspath(__file__)
RAYDEBUG = os.path.join(RAYDEBUG_DIR, "agent", "agent.py")
PYDEVD = os.path.join(sysconfig.get_paths()["purelib"], "debugpy", "_vendored", "pydevd",
                      "pydevd.py")
THREADING = os.path.join(sysconfig.get_paths()["stdlib"], "threading.py")
LIBRARY = os.path.join(sysconfig.get_paths()["purelib"], "ray", "_private", "worker.py")


def stack(*files: str) -> FrameType:
    """A real stack of calls, outermost first, one frame in each of ``files``; returns the
    innermost frame (its callers stay reachable through ``f_back``)."""
    call = sys._getframe  # the innermost function's frame, as its callee sees it
    for filename in reversed(files):
        namespace: dict[str, object] = {}
        exec(compile("def run(inner):\n    return inner()\n", filename, "exec"), namespace)
        call = functools.partial(namespace["run"], call)  # type: ignore[arg-type]
    frame: FrameType = call()
    return frame


def files_from(frame: FrameType | None) -> list[str]:
    files = []
    while frame is not None and frame.f_code.co_filename != USER:
        files.append(frame.f_code.co_filename)
        frame = frame.f_back
    return files[::-1]


def test_a_pause_waiting_in_raydebug_shows_the_user_frame_that_paused():
    top = stack(LIBRARY, USER + ".x", RAYDEBUG, RAYDEBUG, PYDEVD, THREADING, THREADING)
    assert files_from(user_top(top)) == [LIBRARY, USER + ".x"]


def test_a_handler_on_top_of_a_blocked_wait_leaves_the_wait_shown():
    top = stack(USER + ".x", THREADING, THREADING, RAYDEBUG, PYDEVD, THREADING)
    assert files_from(user_top(top)) == [USER + ".x", THREADING, THREADING]


def test_standard_library_frames_between_debugger_frames_are_cut():
    top = stack(USER + ".x", RAYDEBUG, THREADING, PYDEVD, THREADING)
    assert files_from(user_top(top)) == [USER + ".x"]


def test_a_stack_without_debugger_frames_is_left_whole():
    top = stack(USER + ".x", LIBRARY, THREADING)
    assert user_top(top) is top


def test_only_debugger_frames_leave_nothing_above_the_caller():
    top = stack(RAYDEBUG, PYDEVD, THREADING)
    assert files_from(user_top(top)) == []


def test_the_debugger_files_are_raydebug_and_pydevd():
    assert is_debugger_file(RAYDEBUG) and is_debugger_file(PYDEVD)
    assert not is_debugger_file(THREADING) and not is_debugger_file(LIBRARY)
    assert not is_debugger_file(USER)
