"""Every pydevd/debugpy internal the agent touches exists in the installed, pinned debugpy.

:data:`INTERNALS` is the list (docs/pydevd_internals.md says why each is used, and a test
below checks that the doc names every one). The names are looked up in a subprocess that
starts pydevd as the agent does (``agent/debugger/start.py``: that installs tracing, which must not
reach this test process) and hands it a client socket, so that live objects (the debugger,
its reader and writer, a thread's pydevd record) can be checked too.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "pydevd_internals.md"
TIMEOUT = 60

# (where, attribute path). ``where`` is a module to import, or a live object of the started
# pydevd: PyDB (the debugger), waiter (its accept thread, before the agent ends it), writer
# and reader (its client connection's threads), thread_info (a thread's
# ``additional_info``), helper_lib (pydevd's tracing helper library, Python <= 3.11), or
# "source:<module>.<class>" when the attribute is assigned in that class's code only at a
# stop (the path is then text that class's source must contain).
INTERNALS: list[tuple[str, str]] = [
    # starting pydevd (agent/debugger/start.py)
    ("debugpy", "listen"),
    ("debugpy", "configure"),
    ("debugpy.common.log", "log_dir"),
    ("debugpy.server.api", "ensure_logging.ensured"),
    ("pydevd", "create_server_socket"),
    ("debugpy.server.api", "_settrace"),
    ("pydevd", "settrace"),
    ("_pydevd_bundle.pydevd_constants", "get_global_debugger"),
    ("_pydevd_bundle.pydevd_daemon_thread", "PyDBDaemonThread.do_kill_pydev_thread"),
    ("PyDB", "_waiting_for_connection_thread"),
    ("waiter", "_server_socket"),
    ("waiter", "do_kill_pydev_thread"),
    ("PyDB", "dont_trace_external_files"),
    ("PyDB", "get_cache_file_type"),
    ("pydevd", "suspend_all_threads"),
    # clients (agent/debugger/clients.py)
    ("PyDB", "initialize_network"),
    ("PyDB", "reader"),
    ("PyDB", "writer"),
    ("_pydevd_bundle.pydevd_api", "PyDevdAPI.request_disconnect"),
    ("_pydevd_bundle.pydevd_api", "PyDevdAPI.request_resume_thread"),
    ("PyDB", "enable_output_redirection"),
    ("writer", "add_command"),
    ("writer", "_cmd_queue"),
    ("writer", "sock"),
    ("reader", "sock"),
    ("PyDB", "cmd_factory.make_thread_suspend_single_notification"),
    ("_pydevd_bundle.pydevd_constants", "get_thread_id"),
    ("source:pydevd.PyDB", "thread.stop_reason"),
    # stops and suspensions (agent/debugger/: facade.py, suspensions.py, returns.py)
    ("PyDB", "trigger_exception_handler"),
    # a cluster breakpoint's stop (Debugger.stop_here; the arm itself uses no pydevd)
    ("PyDB", "set_trace_for_frame_and_parents"),
    ("PyDB", "set_suspend"),
    ("_pydevd_bundle.pydevd_comm_constants", "CMD_SET_BREAK"),
    # a thread an attached client's pause suspended before the agent heard of that pause
    ("_pydevd_bundle.pydevd_comm_constants", "CMD_THREAD_SUSPEND"),
    ("_pydevd_sys_monitoring.pydevd_sys_monitoring", "update_monitor_events"),
    ("_pydevd_sys_monitoring.pydevd_sys_monitoring", "restart_events"),
    ("_pydevd_sys_monitoring._pydevd_sys_monitoring", "_thread_local_info"),
    # a stop made outside a trace function (agent/debugger/untraced.py)
    ("PyDB", "set_additional_thread_info"),
    ("thread_info", "is_tracing"),
    ("_pydevd_sys_monitoring.pydevd_sys_monitoring", "suspend_current_thread_tracing"),
    ("_pydevd_sys_monitoring.pydevd_sys_monitoring", "resume_current_thread_tracing"),
    ("PyDB", "apply_files_filter"),
    ("PyDB", "do_wait_suspend"),
    ("PyDB", "get_internal_queue_and_event"),
    ("_pydevd_bundle.pydevd_constants", "STATE_SUSPEND"),
    ("_pydevd_bundle.pydevd_constants", "get_current_thread_id"),
    ("thread_info", "pydev_state"),
    ("thread_info", "pydev_step_cmd"),
    ("thread_info", "pydev_step_stop"),
    ("_pydevd_bundle.pydevd_thread_lifecycle", "internal_run_thread"),
    ("_pydevd_bundle.pydevd_process_net_command_json",
     "PyDevJsonCommandProcessor.process_net_command_json"),
    ("_pydevd_bundle.pydevd_process_net_command_json",
     "PyDevJsonCommandProcessor.on_disconnect_request"),
    # threads blocked in C (agent/debugger/blocked_threads.py)
    ("source:_pydevd_bundle.pydevd_constants.get_current_thread_id", "__pydevd_id__"),
    ("source:pydevd.PyDB", "get_current_thread_id(threadingCurrentThread())"),
    ("_pydevd_bundle.pydevd_constants", "STATE_RUN"),
    ("PyDB", "_threads_suspended_single_notification.increment_suspend_time"),
    ("PyDB", "_threads_suspended_single_notification.on_pause"),
    ("_pydevd_bundle.pydevd_comm_constants", "CMD_RETURN"),
    ("_pydevd_bundle.pydevd_net_command", "NetCommand"),
    ("_pydevd_bundle._debug_adapter.pydevd_base_schema", "build_response"),
    ("_pydevd_bundle.pydevd_process_net_command_json", "PyDevJsonCommandProcessor.on_next_request"),
    ("_pydevd_bundle.pydevd_process_net_command_json",
     "PyDevJsonCommandProcessor.on_stepin_request"),
    ("_pydevd_bundle.pydevd_process_net_command_json",
     "PyDevJsonCommandProcessor.on_stepout_request"),
    ("_pydevd_bundle.pydevd_process_net_command_json", "PyDevJsonCommandProcessor.on_goto_request"),
    # tracing follows need (agent/debugger/tracing_keeper.py)
    ("PyDB", "breakpoints"),
    ("PyDB", "file_to_id_to_line_breakpoint"),
    ("PyDB", "file_to_id_to_plugin_breakpoint"),
    ("PyDB", "function_breakpoint_name_to_breakpoint"),
    ("PyDB", "break_on_caught_exceptions"),
    ("PyDB", "break_on_user_uncaught_exceptions"),
    ("PyDB", "has_plugin_line_breaks"),
    ("PyDB", "has_plugin_exception_breaks"),
    ("PyDB", "patch_threads"),
    ("PyDB", "enable_tracing"),
    ("PyDB", "trace_dispatch"),
    ("_pydev_bundle.pydev_monkey", "undo_patch_thread_modules"),
    ("_pydevd_bundle.pydevd_constants", "PYDEVD_USE_SYS_MONITORING"),
    ("_pydevd_sys_monitoring.pydevd_sys_monitoring", "stop_monitoring"),
    ("pydevd_tracing", "_load_python_helper_lib"),
    ("pydevd_tracing", "TracingFunctionHolder._original_tracing"),
    ("pydevd_tracing", "SetTrace"),
    ("helper_lib", "AttachDebuggerTracing"),
    # fork reset (agent/debugger/fork.py)
    ("_pydevd_sys_monitoring.pydevd_sys_monitoring", "reset_thread_local_info"),
    ("_pydev_bundle.pydev_monkey", "_on_forked_process"),
    ("debugpy.server.api", "listen.called"),
]

# Run in a subprocess: table in on stdin, {"where:path": why it is missing} out on stdout.
LOOK_UP = """
import importlib, inspect, json, os, socket, sys, threading

from raydebug.agent.debugger.start import make_private, start_pydevd

table = json.loads(sys.stdin.read())
py_db = start_pydevd()
waiter = getattr(py_db, "_waiting_for_connection_thread", None)
make_private(py_db)
ours, theirs = socket.socketpair()
py_db.initialize_network(theirs, terminate_on_socket_close=False)  # as debugger/clients.py does
from _pydevd_bundle.pydevd_additional_thread_info import set_additional_thread_info

live = {"PyDB": py_db, "waiter": waiter, "writer": py_db.writer, "reader": py_db.reader,
        "thread_info": set_additional_thread_info(threading.current_thread())}
if sys.version_info < (3, 12):
    import pydevd_tracing
    live["helper_lib"] = pydevd_tracing._load_python_helper_lib()
missing = {}
for where, path in table:
    key = f"{where}:{path}"
    try:
        if where.startswith("source:"):
            module, _, name = where[len("source:"):].rpartition(".")
            source = inspect.getsource(getattr(importlib.import_module(module), name))
            if path not in source:
                missing[key] = f"{path!r} no longer appears in {where[len('source:'):]}"
            continue
        if where in live:
            target = live[where]
            if target is None:
                missing[key] = f"{where} is None"
                continue
        else:
            target = importlib.import_module(where)
        walked = where
        for part in path.split("."):
            if not hasattr(target, part):
                missing[key] = f"{walked} has no attribute {part!r}"
                break
            target = getattr(target, part)
            walked += "." + part
    except Exception as error:
        missing[key] = f"{type(error).__name__}: {error}"
sys.stdout.write(json.dumps(missing))
sys.stdout.flush()
os._exit(0)  # pydevd's exit handlers wait for a client that will not come
"""


@pytest.fixture(scope="module")
def missing() -> dict[str, str]:
    """What the pinned debugpy lacks of :data:`INTERNALS` (empty when all is there)."""
    done = subprocess.run([sys.executable, "-c", LOOK_UP], input=json.dumps(INTERNALS),
                          capture_output=True, text=True, timeout=TIMEOUT,
                          env={**os.environ, "PYTHONPATH": str(ROOT / "src")})
    assert done.returncode == 0, done.stderr
    found: dict[str, str] = json.loads(done.stdout)
    return found


def debugpy_version() -> str:
    from importlib.metadata import version

    return version("debugpy")


@pytest.mark.parametrize(("where", "path"), INTERNALS, ids=[f"{w}:{p}" for w, p in INTERNALS])
def test_the_internal_exists_in_the_pinned_debugpy(missing: dict[str, str], where: str,
                                                   path: str) -> None:
    why = missing.get(f"{where}:{path}")
    assert why is None, f"{where}: {path} is missing from debugpy {debugpy_version()}: {why}"


@pytest.mark.parametrize(("where", "path"), INTERNALS, ids=[f"{w}:{p}" for w, p in INTERNALS])
def test_the_doc_names_the_internal(where: str, path: str) -> None:
    """docs/pydevd_internals.md mirrors INTERNALS: each path appears in it."""
    assert path in DOC.read_text(), f"{path} ({where}) is not described in {DOC.name}"
