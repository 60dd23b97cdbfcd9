"""Stacks read from outside a process with py-spy: ``raydebug stacks --native``.

Theory of operation. A process answers ``/api/stacks`` from its link thread, which needs
the GIL; a thread that holds the GIL in C (a regex, a C extension's loop) keeps it from
answering, and the hub lists the process apart. py-spy reads a process's memory with
ptrace and needs no GIL: ``py-spy dump --json --native --pid P`` gives each thread's
Python frames and, between them, the C frames it runs (``--native``). The command runs it
on the processes that did not answer and live on this machine (their record's ``host`` is
this host), several at once, each bounded by a timeout. Each one read becomes its entry as
if it had answered, with ``outside`` naming how it was read (the tree marks its processes),
and the tree is merged again; one that py-spy could not read stays apart, py-spy's reason
added to its own.

py-spy is an optional extra: missing, or without ptrace rights (root, ``CAP_SYS_PTRACE``, or
the same user with ``kernel.yama.ptrace_scope`` 0), it is said in one line with what to do,
and the answer is left as it was. raydebug's own thread in the target (the link thread) and
the frames it runs on top of a user's thread are left out, as the process's own answer does
(:mod:`raydebug.agent.own_frames`).

:func:`threads_from_py_spy` and :func:`read_unanswered` are pure given a ``run`` function
(tests pass one returning a recorded dump); :func:`run_py_spy` is the real one.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from .agent.own_frames import is_debugger_file
from .stack_tree import merge_stacks

READ_BY = "py-spy"  # an entry's ``outside``: how its stacks were read
PARALLEL = 8  # py-spy runs at once: each is ~20-50 ms of ptrace and symbol reading
MIN_TIMEOUT = 5.0  # s per py-spy run: the first --native read of a big library takes a while
HOW_TO_INSTALL = "pip install py-spy"
HOW_TO_PERMIT = ("run it as root, or give it CAP_SYS_PTRACE (the same user needs "
                 "kernel.yama.ptrace_scope 0)")
_NOT_PERMITTED = ("permission denied", "operation not permitted")  # py-spy: "Permission Denied"


@dataclass(frozen=True)
class Dump:
    """One py-spy run's result: ``threads`` as py-spy's JSON said them, or ``error`` (its
    last stderr line), ``permission`` when that error is about ptrace rights."""

    threads: list[dict[str, Any]] | None = None
    error: str = ""
    permission: bool = False


Run = Callable[[str, int, float], Dump]  # (py-spy's path, pid, timeout) -> its dump


def py_spy_path() -> str | None:
    """py-spy on ``PATH``, or beside this Python (a venv's ``bin`` not on ``PATH``)."""
    beside = os.path.join(os.path.dirname(sys.executable), "py-spy")
    return shutil.which("py-spy") or (beside if os.access(beside, os.X_OK) else None)


def run_py_spy(py_spy: str, pid: int, timeout: float) -> Dump:
    """``py-spy dump --json --native --pid PID``, killed after ``timeout`` s."""
    try:
        done = subprocess.run([py_spy, "dump", "--json", "--native", "--pid", str(pid)],
                              capture_output=True, text=True, timeout=timeout, check=False)
    except subprocess.TimeoutExpired:
        return Dump(error=f"py-spy did not finish within {timeout:g}s")
    except OSError as failure:
        return Dump(error=f"py-spy did not start: {failure}")
    if done.returncode != 0:
        return failed(done.stderr, done.returncode)
    try:
        threads = json.loads(done.stdout)
    except ValueError:
        return Dump(error="py-spy's output was not JSON")
    return Dump(threads=threads if isinstance(threads, list) else [])


def failed(stderr: str, returncode: int) -> Dump:
    """What a failed py-spy run said: its ``Error:`` line (a backtrace may follow it), else
    its first line; ``permission`` when it was refused ptrace."""
    said = [line.strip() for line in stderr.splitlines() if line.strip()]
    error = next((line for line in said if line.startswith("Error:")),
                 said[0] if said else f"py-spy exited with {returncode}")
    return Dump(error=error, permission=any(w in stderr.lower() for w in _NOT_PERMITTED))


def threads_from_py_spy(dump: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """py-spy's threads in ``/api/stacks``' shape: ``{"id", "name", "owns_gil",
    "frames"}``, frames outermost first, each ``{"file", "line", "function", "code",
    "native"}`` (a C frame: the library as ``file``, line 0). Frames py-spy could not name
    (an address) are left out, and so are the C frames outside the outermost Python frame
    (the interpreter's start, ``thread_run``: a stack starts where the process's own answer
    would), raydebug's own thread and the frames raydebug runs on top of a user's thread
    (see :func:`_user_frames`)."""
    threads = []
    for thread in dump:
        named = [_frame(frame) for frame in thread.get("frames") or []
                 if not str(frame.get("name") or "").startswith("0x")]
        frames = _user_frames(_from_first_python_frame(named))
        if frames is None:
            continue
        ident = thread.get("thread_id")
        threads.append({
            "id": ident if isinstance(ident, int) else thread.get("os_thread_id"),
            "name": str(thread.get("thread_name") or f"thread {thread.get('os_thread_id')}"),
            "owns_gil": bool(thread.get("owns_gil")),
            "frames": frames[::-1],
        })
    return threads


def _frame(frame: Mapping[str, Any]) -> dict[str, Any]:
    native = frame.get("module") is not None  # py-spy names a C frame's library
    line = frame.get("line")
    return {"file": str(frame.get("filename") or ""), "function": str(frame.get("name") or ""),
            "line": line if isinstance(line, int) else 0, "code": "", "native": native}


def _from_first_python_frame(innermost_first: list[dict[str, Any]]) -> list[dict[str, Any]]:
    outermost_python = max((i for i, f in enumerate(innermost_first) if not f["native"]),
                           default=len(innermost_first) - 1)
    return innermost_first[:outermost_python + 1]


def _user_frames(innermost_first: list[dict[str, Any]]) -> list[dict[str, Any]] | None:
    """The frames from the innermost one a user should see: raydebug's and pydevd's own
    frames cut from the top, with the standard library's and C frames they called. None
    for a thread that runs nothing but the debugger's code (its link thread) below them."""
    kept = 0
    for index, frame in enumerate(innermost_first):
        if not frame["native"] and is_debugger_file(frame["file"]):
            kept = index + 1
        elif not (frame["native"] or _standard_library(frame["file"])):
            return innermost_first[kept:]
    return None if kept else innermost_first


def _standard_library(path: str) -> bool:
    """The target's standard library (its Python may not be this one): a ``lib/pythonX.Y``
    directory outside ``site-packages``, or a frozen module."""
    return path.startswith("<frozen ") or (
        f"{os.sep}lib{os.sep}python" in path and "-packages" + os.sep not in path)


def read_unanswered(answer: Mapping[str, Any], timeout: float, run: Run = run_py_spy,
                    py_spy: str | None = "", host: str = "") -> tuple[dict[str, Any], str]:
    """``answer`` (``/api/stacks``') with its unanswered processes of ``host`` (this one by
    default) read by py-spy, its tree merged again; and a line for the user ("" when there
    is nothing to say): py-spy missing (``py_spy`` None; "" looks for it), not permitted, or
    processes of other machines left unread. Never raises for one process."""
    host = host or socket.gethostname()
    entries = [dict(entry) for entry in answer.get("processes") or []]
    unanswered = [e for e in entries if not e.get("answered")]
    here = [e for e in unanswered if (e.get("process") or {}).get("host") == host
            and isinstance(e["process"].get("pid"), int)]  # a record with no pid: not ours
    elsewhere = sum(1 for e in unanswered if (e.get("process") or {}).get("host") != host)
    away = (f"{elsewhere} process{'es' if elsewhere != 1 else ''} of other machines "
            f"not read (py-spy reads this machine's)") if elsewhere else ""
    if not here:
        return dict(answer), away
    py_spy = py_spy_path() if py_spy == "" else py_spy
    if py_spy is None:
        return dict(answer), _joined(
            f"--native: py-spy is not installed here ({HOW_TO_INSTALL}); "
            f"{len(here)} process{'es' if len(here) != 1 else ''} left unread", away)
    bound = max(timeout, MIN_TIMEOUT)
    with ThreadPoolExecutor(max_workers=min(PARALLEL, len(here))) as pool:
        dumps = list(pool.map(lambda e: run(py_spy, int(e["process"]["pid"]), bound), here))
    refused = []
    for entry, dump in zip(here, dumps, strict=True):
        if dump.threads is not None:
            entry.update(answered=True, outside=READ_BY,
                         threads=threads_from_py_spy(dump.threads))
        elif dump.permission:
            refused.append(entry["process"]["pid"])
        else:
            entry["reason"] = f"{entry.get('reason') or 'did not answer'}; py-spy: {dump.error}"
    denied = (f"--native: py-spy may not read pid{'s' if len(refused) != 1 else ''} "
              f"{', '.join(map(str, refused))}: {HOW_TO_PERMIT}") if refused else ""
    merged = {**answer, "processes": entries, "tree": merge_stacks(entries).to_dict()}
    return merged, _joined(denied, away)


def _joined(*parts: str) -> str:
    return "; ".join(part for part in parts if part)
