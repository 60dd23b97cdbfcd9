"""Which frames are the debugger's own (raydebug's, pydevd's): never shown to a user.

Theory of operation. While raydebug holds a thread (``breakpoint()`` waiting for a client,
a cluster breakpoint's stop, post-mortem, a pause that pydevd suspended, a signal handler
that stops a thread blocked in C), that thread runs raydebug's and pydevd's code on top of
the user's frames, and whatever that code called (``threading``'s waits, ``contextlib``).
A frame is the debugger's when its code's file is under raydebug's package or pydevd's /
debugpy's (:func:`is_debugger_frame`: one rule for every view). A stack is shown from
:func:`user_top` down: the debugger's frames cut from its top, the user's frames and the
user's libraries kept, wherever the thread waits.

pydevd hides the same frames from DAP clients by file (raydebug's files are made its own at
start: :func:`.debugger.start.make_private` uses :data:`RAYDEBUG_DIR`).
"""

from __future__ import annotations

import os
from types import FrameType

RAYDEBUG_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep
# pydevd as debugpy vendors it, or installed on its own (pydevd.py beside its bundles).
_PYDEVD_PARTS = (os.sep + "debugpy" + os.sep, os.sep + "pydevd" + os.sep, os.sep + "_pydev",
                 os.sep + "pydevd.py")
# Where ``os`` is, the standard library is (sysconfig says the same, but costs an import on
# the way to a first pause).
_STANDARD_LIBRARY = os.path.dirname(os.__file__) + os.sep


def is_debugger_file(path: str) -> bool:
    """Whether ``path`` (a code object's ``co_filename``) is raydebug's or pydevd's."""
    return path.startswith(RAYDEBUG_DIR) or any(part in path for part in _PYDEVD_PARTS)


def is_debugger_frame(frame: FrameType) -> bool:
    """Whether ``frame`` runs raydebug's or pydevd's code."""
    return is_debugger_file(frame.f_code.co_filename)


def user_top(top: FrameType | None) -> FrameType | None:
    """The innermost frame of ``top``'s stack to show a user: ``top`` itself when it runs
    no debugger code, else the frame below the debugger's frames on top of the stack.

    From the top, the frames cut are the debugger's and the standard library's they called
    (an ``Event.wait`` of raydebug's, a ``contextlib`` helper between two of pydevd's); the
    first frame that is neither (the user's code, a library of the user's program, Ray's
    worker loop) ends the cut, and standard-library frames it passed below the last
    debugger frame are kept (a signal handler's interrupted ``Event.wait`` is the user's).
    None when nothing but the debugger's frames is left.
    """
    frame, kept = top, top
    while frame is not None:
        if is_debugger_frame(frame):
            kept = frame.f_back
        elif not is_standard_library(frame.f_code.co_filename):
            break
        frame = frame.f_back
    return kept


def is_standard_library(path: str) -> bool:
    """Whether ``path`` (a code object's ``co_filename``) is the standard library's."""
    if path.startswith("<frozen "):
        return True
    return path.startswith(_STANDARD_LIBRARY) and "-packages" + os.sep not in path
