"""Running a line of Python inside another process: gdb with debugpy's attach library, or
``sys.remote_exec`` (PEP 768) on Python 3.14+.

gdb (as debugpy's ``pydevd_attach_to_process`` does it): attach to the process, ``dlopen``
debugpy's ``attach_linux_*.so`` in it, and call its ``DoAttach``, which takes the GIL
(``PyGILState_Ensure``) and runs the code with ``PyRun_SimpleString`` on the thread gdb
stopped in, the main thread. A main thread blocked in C (a lock, ``Event.wait()``,
``ray.get``) is no obstacle: the call runs on top of its blocked system call, which is
resumed afterwards. What can stop it is a thread that holds the GIL in C for longer than
:data:`GDB_TIMEOUT`: gdb is then ended and the link refused (the target may not survive
that: a call cut short cannot return). gdb reads the symbols of libc and of the library
only (``auto-solib-add off``): the target is stopped for as short a time as gdb allows.

``sys.remote_exec(pid, path)`` (3.14+, a linker of 3.14+): the target runs the file when its
main thread next runs Python; a main thread blocked in C does not, so when no result comes
within :data:`REMOTE_EXEC_WAIT` gdb does it. Not tested here: no Python 3.14 on the machine
this was written on.
"""

from __future__ import annotations

import os
import platform
import re
import subprocess
import sys
from pathlib import Path

from ..errors import LinkError

GDB_TIMEOUT = 20.0  # seconds: gdb's attach, the library's load, and the call
REMOTE_EXEC_WAIT = 1.0  # seconds for sys.remote_exec's script to run before gdb does it



def attach_library() -> Path:
    """debugpy's attach library for this machine. Raises :class:`LinkError` when
    debugpy or the library is missing."""
    try:
        import debugpy
    except ImportError:
        raise LinkError("debugpy is not installed with raydebug here") from None
    folder = Path(debugpy.__file__).parent / "_vendored" / "pydevd" / "pydevd_attach_to_process"
    machine = platform.machine()
    arch = {"x86_64": "amd64", "AMD64": "amd64", "i686": "x86", "i386": "x86"}.get(machine,
                                                                                 machine)
    library = folder / f"attach_linux_{arch}.so"
    if not library.exists():
        raise LinkError(f"debugpy has no attach library for {machine} ({library})")
    return library


def gdb_command(pid: int, code: str, library: Path) -> list[str]:
    """The gdb command line that runs ``code`` (one line, no double quotes) in ``pid``."""
    if '"' in code or "\n" in code:
        raise ValueError("the injected code must be one line without double quotes")
    return ["gdb", "--nx", "--nh", "--batch", "--pid", str(pid),
            "--init-eval-command=set auto-solib-add off",  # symbols only of what is needed
            "--init-eval-command=set auto-load off",  # no python*-gdb.py (a warning each)
            "--eval-command=set scheduler-locking off",  # others run: the GIL can be freed
            "--eval-command=sharedlibrary libc",
            f'--eval-command=call (void*)dlopen("{library}", 2)',
            f"--eval-command=sharedlibrary {library.stem}",
            f'--eval-command=call (int)DoAttach(0, "{code}", 0)']


def run_with_gdb(pid: int, code: str, timeout: float = GDB_TIMEOUT) -> None:
    """Run ``code`` in ``pid`` through gdb. Raises :class:`LinkError` with gdb's reason
    in one line (no rights, gone, no Python symbols, timed out)."""
    command = gdb_command(pid, code, attach_library())
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME",
                                                            "PYTHONIOENCODING")}
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=timeout,
                              env=env, stdin=subprocess.DEVNULL, check=False)
    except FileNotFoundError:
        raise LinkError(f"pid {pid}: gdb is not installed here (apt-get install gdb); "
                             "or start it under `raydebug run` next time") from None
    except subprocess.TimeoutExpired:
        raise LinkError(f"pid {pid}: gdb did not finish within {timeout:g} s (a thread "
                             "holding the GIL in C?)") from None
    problem = gdb_problem(done.stdout, done.stderr, done.returncode)
    if problem:
        raise LinkError(f"pid {pid}: {problem}")


# gdb's words -> what to tell the user (first match wins)
GDB_PROBLEMS = (
    (r"ptrace: Operation not permitted", "no ptrace rights over it: link it as its user or "
     "as root, allow ptrace (kernel.yama.ptrace_scope=0) or give CAP_SYS_PTRACE (Kubernetes: "
     "SYS_PTRACE)"),
    (r"ptrace: No such process|The program is not being run|No such process",
     "it exited while being linked"),
    (r"No symbol \"(dlopen|DoAttach)\"", "gdb found no dlopen/DoAttach in it (not a "
     "CPython on glibc?)"),
)


def gdb_problem(stdout: str, stderr: str, returncode: int) -> str | None:
    """What went wrong, read from gdb's output; None when the call was made. (gdb --batch
    exits 0 even when a command failed: its words say. Its warnings, on stderr, are not
    failures: the calls' values, on stdout, say whether DoAttach ran.)"""
    for pattern, said in GDB_PROBLEMS:
        if re.search(pattern, stdout + stderr):
            return said
    values = [line.strip() for line in stdout.splitlines() if re.match(r"\$\d+ = ", line)]
    if values and re.fullmatch(r"\$\d+ = 0", values[-1]) and len(values) >= 2:
        return None  # dlopen's handle, then DoAttach's answer: 0
    words = [line.strip() for line in (stderr + "\n" + stdout).splitlines()
             if line.strip() and not line.strip().startswith("warning:")]
    return f"gdb failed (exit {returncode}): {(words or ['no output'])[-1]}"


def run_with_remote_exec(pid: int, script: Path) -> None:
    """Ask ``pid`` to run ``script`` at its next Python line (3.14+). Raises
    :class:`LinkError` when Python refuses (the target disabled remote debugging, no
    rights, another version)."""
    remote_exec = getattr(sys, "remote_exec", None)
    if remote_exec is None:
        raise LinkError("sys.remote_exec needs Python 3.14")
    try:
        remote_exec(pid, str(script))
    except (OSError, RuntimeError, ValueError) as error:
        raise LinkError(f"pid {pid}: sys.remote_exec failed ({error})") from None
