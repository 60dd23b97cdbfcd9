"""The helpers test modules import as ``helpers``: they live in the repository's
``devtools`` package, which the benchmarks share (conftest puts the root on sys.path)."""

from __future__ import annotations

from devtools.dap_cycles import Evaluated, attach, evaluate_and_continue, locals_of, top_frame
from devtools.processes import (
    BLOCKED_WORKER,
    PAUSING_WORKER,
    TIMEOUT,
    HubProcess,
    ask_until,
    finish,
    line_of,
    listening_ports,
    next_line,
    raydebug,
    read_line,
    run,
    start_hub,
    stop,
    wait_listing,
    wait_processes,
    write_script,
)
from devtools.pythons import find_python, venv_with_debugpy

__all__ = [
    "BLOCKED_WORKER", "PAUSING_WORKER", "TIMEOUT", "Evaluated", "HubProcess", "ask_until",
    "attach", "evaluate_and_continue", "find_python", "finish", "line_of", "listening_ports",
    "locals_of", "next_line", "raydebug", "read_line", "run", "start_hub", "stop",
    "top_frame", "venv_with_debugpy", "wait_listing", "wait_processes", "write_script",
]
