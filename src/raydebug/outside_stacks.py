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

On a Ray cluster (the hub is a cluster's), the processes with a Ray node are read on their
node instead, whatever machine the command runs on: a :data:`NodeReader` (Ray's, in
:mod:`raydebug.integrations.ray.node_stacks`) runs :func:`read_pids` there in a task and
hands back each node's :class:`Reading`; a node that has no py-spy, may not ptrace, or
whose task failed says so in its own line.

:func:`threads_from_py_spy` and :func:`read_unanswered` are pure given a ``run`` function
(tests pass one returning a recorded dump) and a node reader; :func:`run_py_spy` is the
real one.
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
from dataclasses import asdict, dataclass, field
from typing import Any

from .agent.own_frames import is_debugger_file
from .stack_tree import merge_stacks

READ_BY = "py-spy"  # an entry's ``outside``: how its stacks were read
PARALLEL = 8  # py-spy runs at once: each is ~20-50 ms of ptrace and symbol reading
MIN_TIMEOUT = 5.0  # s per py-spy run: the first --native read of a big library takes a while
HOW_TO_INSTALL = "pip install py-spy"
HOW_TO_PERMIT = ("run it as root, or give it CAP_SYS_PTRACE (the same user needs "
                 "kernel.yama.ptrace_scope 0)")
# A node's py-spy runs as Ray's workers there.
HOW_TO_PERMIT_ON_NODES = ("Ray's workers there need CAP_SYS_PTRACE (Kubernetes: the pod's "
                          "SYS_PTRACE capability), or kernel.yama.ptrace_scope 0")
_NOT_PERMITTED = ("permission denied", "operation not permitted")  # py-spy: "Permission Denied"


@dataclass(frozen=True)
class Dump:
    """One py-spy run's result: ``threads`` as py-spy's JSON said them, or ``error`` (its
    last stderr line), ``permission`` when that error is about ptrace rights."""

    threads: list[dict[str, Any]] | None = None
    error: str = ""
    permission: bool = False


Run = Callable[[str, int, float], Dump]  # (py-spy's path, pid, timeout) -> its dump


@dataclass(frozen=True)
class Reading:
    """What py-spy read of one machine's processes: each pid's :class:`Dump`; or
    ``missing`` (py-spy is not installed there), or ``failure`` (why that machine could
    not be asked at all: a node's task that failed or did not end in time)."""

    dumps: dict[int, Dump] = field(default_factory=dict)
    missing: bool = False
    failure: str = ""

    def to_json(self) -> dict[str, Any]:
        """As JSON (a node's task returns it): pids as strings, each dump's fields."""
        return {"dumps": {str(pid): asdict(dump) for pid, dump in self.dumps.items()},
                "missing": self.missing, "failure": self.failure}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Reading:
        return cls({int(pid): Dump(**dump) for pid, dump in (data.get("dumps") or {}).items()},
                   bool(data.get("missing")), str(data.get("failure") or ""))


# {node id: the pids to read there}, timeout -> {node id: its Reading}, every node answered
# (bounded; a node whose reading failed has its ``failure``).
NodeReader = Callable[[dict[str, list[int]], float], dict[str, Reading]]


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


def read_pids(pids: Sequence[int], timeout: float, run: Run = run_py_spy,
              py_spy: str | None = "") -> Reading:
    """py-spy's dump of each of ``pids`` (processes of this machine), :data:`PARALLEL` at
    once, each bounded by ``max(timeout, MIN_TIMEOUT)`` s; ``missing`` without py-spy
    (``py_spy`` None; "" looks for it). Never raises for one process."""
    py_spy = py_spy_path() if py_spy == "" else py_spy
    if py_spy is None:
        return Reading(missing=True)
    if not pids:
        return Reading()
    bound = max(timeout, MIN_TIMEOUT)
    with ThreadPoolExecutor(max_workers=min(PARALLEL, len(pids))) as pool:
        dumps = list(pool.map(lambda pid: run(py_spy, pid, bound), pids))
    return Reading(dict(zip(pids, dumps, strict=True)))


def reading_bound(count: int, timeout: float) -> float:
    """How long :func:`read_pids` may take for ``count`` processes (seconds)."""
    return -(-count // PARALLEL) * max(timeout, MIN_TIMEOUT)


def read_unanswered(answer: Mapping[str, Any], timeout: float, run: Run = run_py_spy,
                    py_spy: str | None = "", host: str = "",
                    nodes: NodeReader | None = None) -> tuple[dict[str, Any], str]:
    """``answer`` (``/api/stacks``') with its unanswered processes read by py-spy, its tree
    merged again; and what to tell the user, a line per place ("" when there is nothing to
    say): py-spy missing there, not permitted, the place not reached, or processes of other
    machines left unread. Read here: those of ``host`` (this one by default); with
    ``nodes``, a process that has a Ray node is read on it instead (an entry read so has
    ``read_on``: the node's id). Never raises for one process or one node."""
    host = host or socket.gethostname()
    entries = [dict(entry) for entry in answer.get("processes") or []]
    on_node: dict[str, list[dict[str, Any]]] = {}
    here, elsewhere = [], 0
    for entry in entries:
        record = entry.get("process") or {}
        if entry.get("answered"):
            continue
        if not isinstance(record.get("pid"), int):  # not a process anyone can read
            elsewhere += record.get("host") != host
        elif nodes is not None and record.get("node_id"):
            on_node.setdefault(str(record["node_id"]), []).append(entry)
        elif record.get("host") == host:
            here.append(entry)
        else:
            elsewhere += 1
    lines = []
    if here:
        reading = read_pids([e["process"]["pid"] for e in here], timeout, run, py_spy)
        lines.append(_apply(reading, here, "here", HOW_TO_PERMIT))
    if on_node and nodes is not None:
        readings = nodes({node: [e["process"]["pid"] for e in group]
                          for node, group in on_node.items()}, timeout)
        for node, group in on_node.items():
            reading = readings.get(node) or Reading(failure="no answer for it")
            lines.append(_apply(reading, group, _node_name(group[0]["process"]),
                                HOW_TO_PERMIT_ON_NODES, node))
    if elsewhere:
        lines.append(f"{_processes(elsewhere)} of other machines not read (py-spy reads "
                     "this machine's)")
    if not (here or on_node):
        return dict(answer), "\n".join(lines)
    merged = {**answer, "processes": entries, "tree": merge_stacks(entries).to_dict()}
    return merged, "\n".join(line for line in lines if line)


def _apply(reading: Reading, entries: list[dict[str, Any]], place: str, permit: str,
           node: str = "") -> str:
    """Put ``reading`` into the ``entries`` read at ``place`` (``node``: a Ray node's id,
    recorded in each entry read); the line to say about that place, or ""."""
    if reading.missing or reading.failure:
        why = (f"py-spy is not installed {place} ({HOW_TO_INSTALL})" if reading.missing
               else f"reading {place} failed ({reading.failure})")
        return f"--native: {why}; {_processes(len(entries))} left unread"
    refused = []
    for entry in entries:
        pid = entry["process"]["pid"]
        dump = reading.dumps.get(pid) or Dump(error="no dump came back")
        if dump.threads is not None:
            entry.update(answered=True, outside=READ_BY,
                         threads=threads_from_py_spy(dump.threads))
            if node:
                entry["read_on"] = node
        elif dump.permission:
            refused.append(pid)
        else:
            entry["reason"] = f"{entry.get('reason') or 'did not answer'}; py-spy: {dump.error}"
    if not refused:
        return ""
    where = "" if place == "here" else f" {place}"
    return (f"--native: py-spy may not read pid{'s' if len(refused) != 1 else ''} "
            f"{', '.join(map(str, refused))}{where}: {permit}")


def _node_name(record: Mapping[str, Any]) -> str:
    """``on node 10.0.0.2 (1a2b3c4d)``: a Ray node as a line names it."""
    return f"on node {record.get('node_ip') or '?'} ({str(record.get('node_id'))[:8]})"


def _processes(count: int) -> str:
    return f"{count} process{'es' if count != 1 else ''}"


def _joined(*parts: str) -> str:
    return "; ".join(part for part in parts if part)
