"""What the linker knows about a target before it touches it, read from ``/proc``, and the
one-line refusals that follow from it.

:func:`read_target` does the reading (it can fail only by finding the process gone);
:func:`refusal` decides, from plain data, whether linking can work: a unit test gives it
any :class:`Target` and :class:`Linker` it likes.
"""

from __future__ import annotations

import itertools
import os
import re
import subprocess
from dataclasses import dataclass

OLDEST = (3, 10)  # raydebug's agent runs on Python 3.10 and later
REMOTE_EXEC = (3, 14)  # sys.remote_exec (PEP 768)
CAP_SYS_PTRACE = 19  # its bit in /proc/PID/status's CapEff
VERSION_TIMEOUT = 5.0  # seconds for `python --version` of the target's interpreter


@dataclass(frozen=True)
class Target:
    """A process as ``/proc`` shows it to the linker. ``uids``: real, effective, saved
    (empty when the process is gone); ``exe``: its executable ("" when it cannot be read:
    no ptrace rights, or gone); ``version``: its Python's ``(major, minor, micro)``, or None
    when it is no Python or cannot be read."""

    pid: int
    uids: tuple[int, ...] = ()
    exe: str = ""
    version: tuple[int, ...] | None = None
    remote_debug_disabled: bool = False  # PYTHON_DISABLE_REMOTE_DEBUG, -X disable-remote-debug
    tracer: str = ""  # "pid 77 (strace)": what ptraces it now (a process has one tracer)

    @property
    def alive(self) -> bool:
        return bool(self.uids)

    @property
    def version_text(self) -> str:
        return ".".join(map(str, self.version)) if self.version else "?"


@dataclass(frozen=True)
class Linker:
    """The linking process: its effective uid and whether it has ``CAP_SYS_PTRACE``; and
    whether gdb and ``sys.remote_exec`` are here."""

    uid: int
    can_ptrace_others: bool
    has_gdb: bool
    has_remote_exec: bool


def refusal(target: Target, linker: Linker, injector: str = "ptrace") -> str | None:
    """Why ``target`` cannot be linked by ``linker``, in one line with what to do; None when
    it can be tried. ``injector``: ``ptrace`` or ``gdb``, the way in below 3.14."""
    pid = target.pid
    if not target.alive:
        return f"pid {pid}: no such process"
    if not linker.can_ptrace_others and any(uid != linker.uid for uid in target.uids):
        return (f"pid {pid}: no ptrace rights over it (it runs as uid {target.uids[0]}, you "
                f"as uid {linker.uid}): link it as its user or as root, or give "
                "CAP_SYS_PTRACE (Kubernetes: the pod's SYS_PTRACE capability); or start it "
                "under `raydebug run` next time")
    if target.tracer:  # ptrace would be refused as if we had no rights: say the real why
        return (f"pid {pid}: {target.tracer} traces it (a debugger, strace or py-spy?), and a "
                "process has one tracer: detach it, then link again")
    if not target.exe:
        return (f"pid {pid}: its executable cannot be read (no ptrace rights?): link it as "
                "its user or as root")
    if target.version is None:
        return f"pid {pid}: not a Python process ({target.exe})"
    if tuple(target.version[:2]) < OLDEST:
        return (f"pid {pid}: Python {target.version_text} ({target.exe}); raydebug needs "
                f"Python {OLDEST[0]}.{OLDEST[1]} or later")
    if tuple(target.version[:2]) >= REMOTE_EXEC and target.remote_debug_disabled:
        return (f"pid {pid}: remote debugging is disabled in it (PYTHON_DISABLE_REMOTE_DEBUG "
                "or -X disable-remote-debug); start it under `raydebug run` instead")
    if injector == "gdb" and not uses_remote_exec(target, linker) and not linker.has_gdb:
        return (f"pid {pid}: gdb is not installed here (apt-get install gdb); or start it "
                "under `raydebug run` next time")
    return None


def uses_remote_exec(target: Target, linker: Linker) -> bool:
    """Whether ``sys.remote_exec`` gets the bootstrap in (a 3.14+ target, linked from a
    3.14+ Python); else gdb does."""
    return bool(target.version) and tuple(target.version or ())[:2] >= REMOTE_EXEC \
        and linker.has_remote_exec


def this_linker() -> Linker:
    import shutil
    import sys

    return Linker(uid=os.geteuid(), can_ptrace_others=_has_cap_sys_ptrace("self"),
                  has_gdb=shutil.which("gdb") is not None,
                  has_remote_exec=hasattr(sys, "remote_exec"))


def read_target(pid: int, proc: str = "/proc") -> Target:
    """``pid`` as ``/proc`` shows it; a gone process is a :class:`Target` with no uids."""
    try:
        status = _read_text(f"{proc}/{pid}/status")
    except OSError:
        return Target(pid)
    found = re.search(r"^Uid:\s+(\d+)\s+(\d+)\s+(\d+)", status, re.MULTILINE)
    uids = tuple(int(u) for u in found.groups()) if found else (-1,)
    tracer = _tracer(status, proc)
    try:
        exe = os.readlink(f"{proc}/{pid}/exe")
    except OSError:  # no ptrace-read rights (or it just ended)
        return Target(pid, uids, tracer=tracer)
    version = python_version(f"{proc}/{pid}", exe)
    return Target(pid, uids, exe, version, remote_debug_disabled(f"{proc}/{pid}"), tracer)


def _tracer(status: str, proc: str) -> str:
    """``"pid 77 (strace)"``: the process that ptraces the one whose ``status`` this is;
    "" when none does."""
    found = re.search(r"^TracerPid:\s+(\d+)", status, re.MULTILINE)
    if not found or found.group(1) == "0":
        return ""
    try:
        name = _read_text(f"{proc}/{found.group(1)}/comm").strip()
    except OSError:  # it ended meanwhile, or its name is not ours to read
        name = ""
    return f"pid {found.group(1)}" + (f" ({name})" if name else "")


def runs(pid: int, proc: str = "/proc") -> bool:
    """Whether ``pid`` still runs: it exists and has not ended (a zombie, whose exit its
    parent has not collected yet, has). One read of ``/proc``, unlike :func:`read_target`."""
    try:
        stat = _read_text(f"{proc}/{pid}/stat")
    except OSError:
        return False
    state = stat.rpartition(")")[2].split()[:1]  # after the command, which may hold spaces
    return state not in (["Z"], ["X"], [])


def python_version(proc_dir: str, exe: str) -> tuple[int, ...] | None:
    """The version of the Python running as ``proc_dir`` (None when it is no Python): asked
    of its own executable (``--version``), which runs the same interpreter whether the
    process runs from a venv or not. Only an executable named ``python...`` or one with
    ``libpython`` mapped is asked."""
    if not os.path.basename(exe).startswith("python") and not _maps_libpython(proc_dir):
        return None
    try:
        answer = subprocess.run([f"{proc_dir}/exe", "--version"], capture_output=True,
                                text=True, timeout=VERSION_TIMEOUT, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return parse_version(answer.stdout + answer.stderr)


def parse_version(text: str) -> tuple[int, ...] | None:
    """``"Python 3.12.1"`` -> ``(3, 12, 1)``; None when ``text`` says no Python version."""
    found = re.match(r"\s*Python (\d+)\.(\d+)\.?(\d*)", text)
    if not found:
        return None
    return tuple(int(part) for part in found.groups() if part)


def remote_debug_disabled(proc_dir: str) -> bool:
    """Whether the process said no to remote debugging (PEP 768): a non-empty
    ``PYTHON_DISABLE_REMOTE_DEBUG`` in its environment, or ``-X disable-remote-debug``."""
    try:
        environ = _read_bytes(f"{proc_dir}/environ").split(b"\0")
        argv = _read_bytes(f"{proc_dir}/cmdline").split(b"\0")
    except OSError:
        return False
    return disables_remote_debug(environ, argv)


def disables_remote_debug(environ: list[bytes], argv: list[bytes]) -> bool:
    if any(item.startswith(b"PYTHON_DISABLE_REMOTE_DEBUG=") and item.partition(b"=")[2]
           for item in environ):
        return True
    return any(pair == (b"-X", b"disable-remote-debug") for pair in itertools.pairwise(argv)) \
        or b"-Xdisable-remote-debug" in argv


def _maps_libpython(proc_dir: str) -> bool:
    try:
        return b"libpython3" in _read_bytes(f"{proc_dir}/maps")
    except OSError:
        return False


def _has_cap_sys_ptrace(pid: str, proc: str = "/proc") -> bool:
    try:
        status = _read_text(f"{proc}/{pid}/status")
    except OSError:
        return False
    found = re.search(r"^CapEff:\s+([0-9a-f]+)", status, re.MULTILINE)
    return bool(found and int(found.group(1), 16) >> CAP_SYS_PTRACE & 1)


def _read_text(path: str) -> str:
    with open(path, encoding="utf-8", errors="replace") as handle:
        return handle.read()


def _read_bytes(path: str) -> bytes:
    with open(path, "rb") as handle:
        return handle.read()
