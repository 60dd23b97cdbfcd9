"""Every Python thread's stack, read in-process without pausing anything.

Theory of operation. The link thread reads ``sys._current_frames()`` when the hub asks: no
ptrace, no signal, no tracing. A thread blocked in C with the GIL released (a lock, a
socket, ``ray.get``) shows where it entered C; a thread holding the GIL in C code delays the
answer until it lets go (the hub then lists the process as not answering). raydebug's own
threads (marked invisible to pydevd) are left out, and so are the frames raydebug and pydevd
run on top of a user's thread while they hold it (:func:`.own_frames.user_top`): a paused
thread's stack ends at the user's frame it paused in; a thread frozen post-mortem shows the
stack of the frame that raised, not the exception hook's. Locals, when asked for, are
``reprlib`` reprs, bounded in size and count, and a ``repr`` that raises shows as its error.
"""

from __future__ import annotations

import linecache
import reprlib
import sys
import threading
from collections.abc import Mapping
from types import FrameType
from typing import Any

from .own_frames import is_debugger_frame, user_top

MAX_FRAMES = 200  # innermost frames kept per thread (a deep recursion stays readable)
MAX_LOCALS = 50  # per frame
_REPR = reprlib.Repr()
_REPR.maxstring = 120
_REPR.maxother = 120
_REPR.maxlong = 60


def collect_threads(with_locals: bool = False,
                    raised_in: Mapping[int, FrameType] | None = None) -> list[dict[str, Any]]:
    """Each visible Python thread as ``{"id", "name", "daemon", "frames"}``; frames
    outermost first, each ``{"file", "line", "function", "code"}`` (+ ``"locals"``), the
    debugger's own cut from the top. ``raised_in``: thread ident -> the frame that raised,
    for threads frozen post-mortem (their stack is that frame's). A thread that runs nothing
    but the debugger's code is left out."""
    threads = {thread.ident: thread for thread in threading.enumerate()}
    result = []
    me = threading.get_ident()
    for ident, top in sys._current_frames().items():
        thread = threads.get(ident)
        if ident == me or (thread is not None and getattr(thread, "pydev_do_not_trace", False)
                           and not getattr(thread, "raydebug_spared", False)):
            continue  # raydebug's (or pydevd's) own thread, not a library's spared one
        if thread is None and _debugger_internal(top):
            continue  # pydevd takes its own threads out of threading.enumerate()
        shown = (raised_in or {}).get(ident) or user_top(top)
        if shown is None:
            continue
        result.append({
            "id": ident,
            "name": thread.name if thread is not None else f"thread {ident}",
            "daemon": thread.daemon if thread is not None else True,
            "frames": frames_of(shown, with_locals),
        })
    return result


def _debugger_internal(top: FrameType) -> bool:
    """Whether a thread runs raydebug's or pydevd's code (a frame of its stack is theirs)."""
    frame: FrameType | None = top
    while frame is not None:
        if is_debugger_frame(frame):
            return True
        frame = frame.f_back
    return False


def frames_of(top: FrameType | None, with_locals: bool = False) -> list[dict[str, Any]]:
    """The stack ending in ``top``, outermost first (at most :data:`MAX_FRAMES`)."""
    frames: list[dict[str, Any]] = []
    frame = top
    while frame is not None and len(frames) < MAX_FRAMES:
        code = frame.f_code
        line = frame.f_lineno or code.co_firstlineno
        entry: dict[str, Any] = {"file": code.co_filename, "line": line,
                                 "function": code.co_name,
                                 "code": linecache.getline(code.co_filename, line).strip()}
        if with_locals:
            entry["locals"] = bounded_locals(frame)
        frames.append(entry)
        frame = frame.f_back
    frames.reverse()
    return frames


def bounded_locals(frame: FrameType) -> dict[str, str]:
    """The first :data:`MAX_LOCALS` locals of ``frame`` as bounded reprs."""
    try:
        items = list(frame.f_locals.items())[:MAX_LOCALS]
    except Exception as error:  # a frame whose locals cannot be read: say why
        return {"?": f"<cannot read locals: {type(error).__name__}>"}
    shown = {}
    for name, value in items:
        try:
            shown[str(name)] = _REPR.repr(value)
        except Exception as error:
            shown[str(name)] = f"<repr failed: {type(error).__name__}: {error}>"[:200]
    return shown
