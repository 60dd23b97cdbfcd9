"""Run a line of Python in another process's main thread with ptrace alone (x86-64 Linux):
what gdb does for debugpy's ``DoAttach``, without gdb.

Why not gdb: gdb 13 (Debian 12's) cannot call a function in a process on a CPU with AMX
(its register write fails: "Couldn't write extended state status: Bad address") and leaves
the process to abort. Doing the three calls ourselves needs only the general and the SSE
registers, which ``PTRACE_GETREGS`` / ``PTRACE_GETFPREGS`` save and restore exactly.

Theory of operation. One thread is traced (``PTRACE_SEIZE`` + ``PTRACE_INTERRUPT``, no
``SIGSTOP``): the other threads never stop, and a thread busy in Python loses only the time
the bootstrap holds the GIL. That thread must be waiting in a system call (:func:`look`:
the main thread if it waits, else a C thread in an event loop): one stopped while running
code may hold the GIL or be halfway through the interpreter's own work, where no Python can
run. Nor may it be waiting for the GIL itself (a futex inside the interpreter's state,
``_PyRuntime``): ``PyGILState_Ensure`` would take the GIL inside that thread's own unfinished
wait on the GIL's condition variable, a wait glibc counts, and the thread's next release of
the GIL (``pthread_cond_signal``) would wait forever for that wait to end. While the threads
that could take the call wait for the GIL (another holds it in C), the helper looks again
until one waits elsewhere (:class:`GilSearch`). With the thread stopped (and still in its
system call), its registers are saved, the code string is written below its stack pointer
(past the red zone), and three calls are made there, each by setting ``rip`` to the
function, its argument in ``rdi``, a return address of 0 on the stack, and ``orig_rax`` -1
(so an interrupted system call is not restarted into our call): the function returns to 0,
faults, and the fault stops the thread for us again. The calls are ``PyGILState_Ensure()``
(waits for the GIL, as any thread would), ``PyRun_SimpleString(code)``,
``PyGILState_Release(state)``. Then the saved registers are put back and the thread let go:
the system call it was blocked in (a lock, ``Event.wait()``, ``ray.get``) is restarted by
the kernel as after any signal. The functions' addresses come from the dynamic symbol table
of the executable or ``libpython`` mapped in the process (:func:`find_symbols`).

Bounds: a call cannot be taken back once made (abandoned, the thread would return to
address 0 with no tracer to catch it, and the process would die), so the tracer is a helper
process (:func:`main`) that waits as long as the calls take, and the linker waits for the
helper at most :data:`CALL_TIMEOUT` (:func:`run_python`): past it, a thread holds the GIL
in C, the linker says so, and the helper finishes the link when the GIL is free (its look
for a thread to call into gives up after :data:`PATIENCE`; a call once made, never). A
process that ends meanwhile is reported as such.
"""

from __future__ import annotations

import ctypes
import functools
import json
import os
import shutil
import signal
import struct
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import LinkError, LinkPendingError, NotInSystemCallError, ProcessGoneError

HANDED_OVER = "handed-over"  # in a ticket's directory: the helper removes it when done
CALL_TIMEOUT = 20.0  # seconds the linker waits for the three calls (the GIL may be busy)

PTRACE_CONT, PTRACE_GETREGS, PTRACE_SETREGS = 7, 12, 13
PTRACE_GETFPREGS, PTRACE_SETFPREGS, PTRACE_DETACH = 14, 15, 17
PTRACE_SEIZE, PTRACE_INTERRUPT = 0x4206, 0x4207
WALL = 0x40000000  # waitpid's __WALL: also a thread that is not a child
REGS = 27  # unsigned longs in x86-64's user_regs_struct
RIP, RSP, RAX, RDI, ORIG_RAX = 16, 19, 10, 14, 15  # their indexes there
RED_ZONE = 512  # bytes below the stack pointer left alone (the ABI's is 128)
NO_SYSCALL = (1 << 64) - 1  # orig_rax = -1
FUTEX = 202  # the system call a thread waiting for the GIL (or any lock) is in

# While the threads that could take the call wait for the GIL (see GilSearch):
LOOK_EVERY = 0.01  # seconds between two looks at the target's threads (/proc only)
QUIET = 1.0  # seconds with no thread safe to call into nor waiting for the GIL: refused
BUSY_SHARE = 0.05  # share of the time the watched threads ran above which they run Python
BUSY_MIN = 0.05  # CPU seconds they must have run before that share is believed
PATIENCE = 600.0  # seconds the GIL may stay held before the helper gives up (nothing done)


@dataclass(frozen=True)
class Functions:
    """The addresses of the three C functions in the target, and where its interpreter's
    state (``_PyRuntime``, which holds the main interpreter's GIL) lies."""

    ensure: int
    run: int
    release: int
    runtime: range

    def waits_for_the_gil(self, call: int, argument: int) -> bool:
        """Whether a thread in system call ``call`` with first argument ``argument`` waits
        for the GIL (or on its hand-over): a futex inside the interpreter's state."""
        return call == FUTEX and argument in self.runtime


# System calls a thread with no Python of its own waits in (an event loop: Ray's, gRPC's):
# poll, select, epoll_wait, pselect6, ppoll, epoll_pwait
WAITING_CALLS = {7, 23, 232, 270, 271, 281}
TRIES = 5  # threads tried at one look (each left as it was when not in a system call)


def run_python(pid: int, code: str, timeout: float = CALL_TIMEOUT,
               then_remove: Path | None = None) -> int:
    """Run ``code`` in ``pid`` (see :func:`run_python_here`) through a helper process, the
    tracer, waiting at most ``timeout`` seconds for it. A call that started cannot be taken
    back (the thread is inside ``PyGILState_Ensure``, waiting for a GIL that another thread
    holds in C): past the bound, the helper is left to finish it when the GIL is free, in a
    session of its own, and this raises :class:`LinkPendingError` saying so; the helper then
    removes ``then_remove`` (the ticket's directory, which the code reads), once done.
    Returns ``PyRun_SimpleString``'s result."""
    helper = subprocess.Popen(
        [sys.executable, "-m", __name__, str(pid), str(then_remove or "")],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, start_new_session=True,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(
            [str(Path(__file__).resolve().parents[2]), os.environ.get("PYTHONPATH", "")])})
    try:
        out, _ = helper.communicate(code.encode(), timeout=timeout)
    except subprocess.TimeoutExpired:
        if then_remove is not None:
            (then_remove / HANDED_OVER).touch()
            if helper.poll() is not None:  # it finished meanwhile, before seeing the mark
                shutil.rmtree(then_remove, ignore_errors=True)
        raise LinkPendingError(
            f"pid {pid}: a thread of it holds the GIL in C (no answer within {timeout:g} s): "
            f"the link finishes when it lets go (helper pid {helper.pid})", helper.pid) from None
    try:
        answer = json.loads(out)
    except ValueError:
        raise LinkError(f"pid {pid}: the ptrace helper failed (exit {helper.returncode})"
                        ) from None
    if "error" in answer:
        raise (ProcessGoneError if answer.get("gone") else LinkError)(str(answer["error"]))
    return int(answer["result"])


def run_python_here(pid: int, code: str) -> int:
    """Run ``code`` in ``pid``, on a thread blocked in a system call (:func:`look`), this
    thread its tracer; returns ``PyRun_SimpleString``'s result (0: ran, -1: raised, the
    traceback printed in the target). Waits as long as the call takes (see
    :func:`run_python` for the bound), and while no thread can take it because they wait
    for the GIL, at most :data:`PATIENCE` s (:class:`GilSearch`). Raises
    :class:`LinkError`."""
    if os.uname().machine != "x86_64":
        raise LinkError(f"pid {pid}: linking works on x86-64 Linux only (this is "
                        f"{os.uname().machine})")
    functions = python_functions(pid)
    search = GilSearch(time.monotonic())
    while True:
        threads = look(pid, functions)
        for tid in threads.safe[:TRIES]:
            try:
                return Tracee(pid, tid).run(functions, code.encode() + b"\0")
            except NotInSystemCallError:
                continue  # it left its system call meanwhile (or waits for the GIL)
        if not search.keep_looking(threads, time.monotonic()):
            break
        time.sleep(LOOK_EVERY)  # no event says a thread of another process started waiting
    if search.timed_out:
        raise LinkError(f"pid {pid}: its GIL stayed held for {PATIENCE:g} s (a thread in C): "
                        "not linked, nothing done to it: try again")
    raise LinkError(f"pid {pid}: none of its threads waits in a system call now (its main "
                    "thread runs Python, and no other thread waits in C): try again, or "
                    "start it under `raydebug run` next time")


@dataclass
class Threads:
    """One look at a target's threads (:func:`look`): ``safe``, those to run the code on,
    best first; ``for_the_gil``, those waiting for the GIL; ``cpu``, the CPU seconds used so
    far by the main thread and by each waiting for the GIL."""

    safe: list[int]
    for_the_gil: list[int]
    cpu: dict[int, float]


@dataclass
class GilSearch:
    """Whether to look again when no thread can take the call now. A thread waiting for the
    GIL cannot (see the module docstring), but it will run Python once the GIL is free and
    then, in most programs, wait in a system call again: so once one was seen waiting, look
    again until a thread is safe to call into. What tells a GIL held in C (a regex, an
    extension that does not release it) from threads running Python (which may never leave
    one waiting in a system call) is CPU time: a thread waiting for a GIL held in C wakes
    every 5 ms for microseconds. (Whether it waits cannot tell it: on a loaded machine a
    waiter woken by its timeout stays runnable, "running" in ``/proc``, for tens of ms.) So
    the search ends when the main thread and the threads seen waiting for the GIL ran more
    than :data:`BUSY_SHARE` of the time (they run Python: refused as busy), after
    :data:`QUIET` s if no thread was seen waiting for the GIL, or after :data:`PATIENCE` s
    (``timed_out``: the GIL stayed held)."""

    started: float
    first_cpu: dict[int, float] = field(default_factory=dict)
    last_cpu: dict[int, float] = field(default_factory=dict)
    seen_waiting: bool = False
    timed_out: bool = False

    def keep_looking(self, threads: Threads, now: float) -> bool:
        """Given one look at the threads, at ``now``: look again?"""
        self.seen_waiting = self.seen_waiting or bool(threads.for_the_gil)
        for tid, cpu in threads.cpu.items():
            self.first_cpu.setdefault(tid, cpu)
            self.last_cpu[tid] = cpu
        ran = sum(self.last_cpu[tid] - self.first_cpu[tid] for tid in self.last_cpu)
        if ran >= BUSY_MIN and ran >= BUSY_SHARE * (now - self.started):
            return False
        if now - self.started >= PATIENCE:
            self.timed_out = True
            return False
        return self.seen_waiting or now - self.started < QUIET


def look(pid: int, functions: Functions) -> Threads:
    """The threads to run the code on, best first: the main thread when it waits in a
    system call (then raydebug's pause signal can be installed there), else threads
    waiting in an event loop's call (C threads: Ray's, gRPC's; ``PyGILState_Ensure`` gives
    them a thread state for the time of the call); and the threads waiting for the GIL. A
    thread running code is never one: it may hold the GIL, or be halfway through the
    interpreter's own work; nor is one waiting for the GIL (see the module docstring)."""
    try:
        tids = sorted(int(name) for name in os.listdir(f"/proc/{pid}/task") if name.isdigit())
    except FileNotFoundError:
        raise ProcessGoneError(f"pid {pid}: no such process") from None
    except PermissionError:
        tids = [pid]
    threads = Threads([], [], {pid: cpu_seconds(pid, pid)})
    for tid in tids:
        call = waiting_in(pid, tid)
        if call is None:
            continue
        if functions.waits_for_the_gil(*call):
            threads.for_the_gil.append(tid)
            threads.cpu[tid] = cpu_seconds(pid, tid)
        elif tid == pid:
            threads.safe.insert(0, tid)
        elif call[0] in WAITING_CALLS:
            threads.safe.append(tid)
    return threads


def waiting_in(pid: int, tid: int) -> tuple[int, int] | None:
    """The system call thread ``tid`` waits in and its first argument, or None when it runs
    (or cannot be read)."""
    try:
        with open(f"/proc/{pid}/task/{tid}/syscall", encoding="ascii") as handle:
            fields = handle.read().split()
    except OSError:
        return None
    if len(fields) < 2 or not fields[0].isdigit():
        return None  # "running", or "-1 ...": stopped outside any system call
    return int(fields[0]), int(fields[1], 16)


def cpu_seconds(pid: int, tid: int) -> float:
    """The CPU time thread ``tid`` has used (user and system), 0 when it cannot be read."""
    try:
        with open(f"/proc/{pid}/task/{tid}/stat", encoding="ascii", errors="replace") as handle:
            fields = handle.read().rsplit(")", 1)[-1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return 0.0


class Tracee:
    """One thread ``tid`` of ``pid`` under ptrace for the time of :meth:`run`."""

    def __init__(self, pid: int, tid: int | None = None) -> None:
        self.pid = pid
        self.tid = tid or pid
        self.libc = ctypes.CDLL(None, use_errno=True)
        self.libc.ptrace.restype = ctypes.c_long
        self.libc.ptrace.argtypes = [ctypes.c_long, ctypes.c_long, ctypes.c_void_p,
                                     ctypes.c_void_p]

    def run(self, functions: Functions, code: bytes) -> int:
        self._ptrace(PTRACE_SEIZE, 0, 0, what="attach")
        pending = 0  # a signal the thread stopped with instead of our interrupt: given back
        try:
            self._ptrace(PTRACE_INTERRUPT, 0, 0, what="interrupt")
            pending = self._wait_stop()
            saved = self._registers()
            if saved[ORIG_RAX] == NO_SYSCALL:  # it left its system call: not here
                raise NotInSystemCallError(f"pid {self.pid}: thread {self.tid} runs code")
            if functions.waits_for_the_gil(saved[ORIG_RAX], saved[RDI]):  # it started to
                raise NotInSystemCallError(f"pid {self.pid}: thread {self.tid} waits for "
                                           "the GIL")
            fpregs = ctypes.create_string_buffer(512)
            self._ptrace(PTRACE_GETFPREGS, 0, ctypes.addressof(fpregs), what="read registers")
            try:
                text = (saved[RSP] - RED_ZONE - len(code)) & ~0xF
                self._write(text, code)
                stack = text - 64
                state = self._call(saved, stack, functions.ensure, 0)
                result = self._call(saved, stack, functions.run, text)
                self._call(saved, stack, functions.release, state & 0xFFFFFFFF)
            finally:
                self._set_registers(saved)
                self._ptrace(PTRACE_SETFPREGS, 0, ctypes.addressof(fpregs),
                             what="restore registers")
            signed = result & 0xFFFFFFFF
            return signed - (1 << 32) if signed >> 31 else signed
        finally:
            self._detach(pending)

    def _call(self, saved: list[int], stack: int, function: int, argument: int) -> int:
        """Call ``function(argument)`` on the stopped thread; its return value (rax)."""
        regs = list(saved)
        top = stack & ~0xF
        self._write(top - 8, struct.pack("<Q", 0))  # the return address: 0, which faults
        regs[RSP], regs[RIP], regs[RDI] = top - 8, function, argument
        regs[RAX], regs[ORIG_RAX] = 0, NO_SYSCALL
        self._set_registers(regs)
        self._ptrace(PTRACE_CONT, 0, 0, what="continue")
        while True:
            sig = self._wait_stop()
            now = self._registers()
            if sig == signal.SIGSEGV and now[RIP] == 0:
                return now[RAX]
            if sig in (signal.SIGSEGV, signal.SIGBUS, signal.SIGILL, signal.SIGFPE):
                raise LinkError(f"pid {self.pid}: the injected call faulted (signal {sig} "
                                  f"at {now[RIP]:#x})")
            self._ptrace(PTRACE_CONT, 0, sig, what="continue")  # another signal: deliver it

    def _wait_stop(self) -> int:
        """Wait until the thread stops; the signal it stopped with (0 for our interrupt).
        Raises :class:`ProcessGoneError` when it ended. Unbounded: a call, once started,
        must be seen to its end (:func:`run_python` bounds the wait for it)."""
        try:
            _, status = os.waitpid(self.tid, WALL)
        except ChildProcessError:
            raise ProcessGoneError(f"pid {self.pid}: it exited while being linked") from None
        if os.WIFEXITED(status) or os.WIFSIGNALED(status):
            raise ProcessGoneError(f"pid {self.pid}: it exited while being linked")
        if status >> 16:  # PTRACE_EVENT_STOP: our interrupt (or a group stop)
            return 0
        return os.WSTOPSIG(status)

    def _registers(self) -> list[int]:
        regs = (ctypes.c_ulong * REGS)()
        self._ptrace(PTRACE_GETREGS, 0, ctypes.addressof(regs), what="read registers")
        return list(regs)

    def _set_registers(self, values: list[int]) -> None:
        regs = (ctypes.c_ulong * REGS)(*values)
        self._ptrace(PTRACE_SETREGS, 0, ctypes.addressof(regs), what="write registers")

    def _write(self, address: int, data: bytes) -> None:
        try:
            with open(f"/proc/{self.tid}/mem", "r+b", buffering=0) as memory:
                memory.seek(address)
                memory.write(data)
        except OSError as error:
            raise LinkError(f"pid {self.pid}: cannot write its memory ({error.strerror})"
                              ) from None

    def _detach(self, sig: int) -> None:
        self.libc.ptrace(PTRACE_DETACH, self.tid, None, ctypes.c_void_p(sig or 0))

    def _ptrace(self, request: int, address: int, data: int, what: str) -> None:
        if self.libc.ptrace(request, self.tid, ctypes.c_void_p(address),
                            ctypes.c_void_p(data)) == -1:
            errno = ctypes.get_errno()
            if errno == 3:  # ESRCH
                raise ProcessGoneError(f"pid {self.pid}: it exited while being linked")
            if errno == 1:  # EPERM
                raise LinkError(
                    f"pid {self.pid}: no ptrace rights over it: link it as its user or as "
                    "root, allow ptrace (kernel.yama.ptrace_scope=0) or give CAP_SYS_PTRACE "
                    "(Kubernetes: SYS_PTRACE); or start it under `raydebug run` next time")
            raise LinkError(f"pid {self.pid}: ptrace could not {what} "
                              f"({os.strerror(errno)})")


def python_functions(pid: int) -> Functions:
    """Where ``PyGILState_Ensure``, ``PyRun_SimpleString``, ``PyGILState_Release`` and
    ``_PyRuntime`` are in ``pid``: in its executable or its ``libpython``. Raises
    :class:`LinkError` when no mapped file exports them (no CPython)."""
    names = ("PyGILState_Ensure", "PyRun_SimpleString", "PyGILState_Release", "_PyRuntime")
    for path, base in mapped_files(pid):
        if "python" not in os.path.basename(path):
            continue
        try:
            file = f"/proc/{pid}/root{path}"
            status = os.stat(file)
            found = find_symbols_once(file, status.st_ino, status.st_mtime_ns, names)
        except (OSError, ValueError):
            continue
        if all(name in found for name in names):
            ensure, run, release, runtime = (found[name][0] + (base if found[name][1] else 0)
                                             for name in names)
            return Functions(ensure, run, release,
                             range(runtime, runtime + found["_PyRuntime"][2]))
    raise LinkError(f"pid {pid}: no CPython found in it (no {names[1]})")


def mapped_files(pid: int) -> list[tuple[str, int]]:
    """Each file mapped in ``pid`` with the address its offset 0 is mapped at."""
    bases: dict[str, int] = {}
    try:
        with open(f"/proc/{pid}/maps", encoding="utf-8", errors="replace") as maps:
            for line in maps:
                fields = line.split(maxsplit=5)
                if len(fields) == 6 and fields[5].startswith("/") and int(fields[2], 16) == 0:
                    bases.setdefault(fields[5].strip(), int(fields[0].split("-")[0], 16))
    except FileNotFoundError:
        raise ProcessGoneError(f"pid {pid}: no such process") from None
    except PermissionError:
        raise LinkError(f"pid {pid}: no rights to read its memory map: link it as its "
                          "user or as root") from None
    return list(bases.items())


@functools.lru_cache(maxsize=16)
def find_symbols_once(path: str, inode: int, mtime: int, names: tuple[str, ...]
                      ) -> dict[str, tuple[int, bool, int]]:
    """:func:`find_symbols`, read once per file (and version of it): processes linked
    together mostly run the same Python (~10-25 ms to read a libpython)."""
    return find_symbols(path, names)


def find_symbols(path: str, names: tuple[str, ...]) -> dict[str, tuple[int, bool, int]]:
    """``name -> (value, relocatable, size)`` from the ELF file's dynamic symbol table; a
    relocatable (shared, PIE) file's values are offsets from where it is mapped."""
    with open(path, "rb") as handle:
        data = handle.read()
    if data[:4] != b"\x7fELF" or data[4] != 2:
        raise ValueError("not a 64-bit ELF file")
    elf_type, = struct.unpack_from("<H", data, 16)
    shoff, = struct.unpack_from("<Q", data, 0x28)
    shentsize, shnum = struct.unpack_from("<HH", data, 0x3A)
    sections = [struct.unpack_from("<IIQQQQIIQQ", data, shoff + i * shentsize)
                for i in range(shnum)]
    wanted, found = set(names), {}
    for section in sections:
        if section[1] != 11:  # SHT_DYNSYM
            continue
        strings = sections[section[6]]
        offset, size = section[4], section[5]
        for start in range(offset, offset + size, 24):
            name_at, _info, _other, shndx, value, length = struct.unpack_from("<IBBHQQ", data,
                                                                             start)
            if not shndx or not value:
                continue  # undefined here
            end = data.index(b"\0", strings[4] + name_at)
            name = data[strings[4] + name_at:end].decode("latin-1")
            if name in wanted:
                found[name] = (value, elf_type == 3, length)  # ET_DYN
    return found


def main(argv: list[str]) -> int:
    """The helper :func:`run_python` starts: ``python -m raydebug.linking.ptrace_call PID
    [DIRECTORY]``, the code on stdin; one JSON object on stdout: ``{"result": N}`` or
    ``{"error": LINE, "gone": BOOL}``. ``DIRECTORY`` is removed once the call is done if the
    linker has handed it over (it marks it so when it stops waiting)."""
    pid, code = int(argv[1]), sys.stdin.read()
    try:
        answer: dict[str, object] = {"result": run_python_here(pid, code)}
    except LinkError as error:
        answer = {"error": str(error), "gone": isinstance(error, ProcessGoneError)}
    finally:
        if len(argv) > 2 and argv[2] and os.path.exists(os.path.join(argv[2], HANDED_OVER)):
            shutil.rmtree(argv[2], ignore_errors=True)
    try:
        print(json.dumps(answer), flush=True)
    except OSError:  # the linker gave up waiting and went: the link is done all the same
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
