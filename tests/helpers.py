"""The helpers test modules import as ``helpers``: they live in the repository's
``devtools`` package, which the benchmarks share (conftest puts the root on sys.path)."""

from __future__ import annotations

from devtools.dap_cycles import Evaluated, attach, evaluate_and_continue
from devtools.processes import (
    PAUSING_WORKER,
    TIMEOUT,
    HubProcess,
    finish,
    line_of,
    listening_ports,
    read_line,
    run,
    start_hub,
    stop,
    wait_processes,
    write_script,
)
from devtools.pythons import find_python, venv_with_debugpy

__all__ = [
    "PAUSING_WORKER", "TIMEOUT", "Evaluated", "HubProcess", "attach", "evaluate_and_continue",
    "find_python", "finish", "line_of", "listening_ports", "read_line", "run", "start_hub",
    "stop", "venv_with_debugpy", "wait_processes", "write_script",
]
