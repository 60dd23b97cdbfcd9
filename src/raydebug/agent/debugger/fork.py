"""A fork child's reset of the pydevd it inherited, so that it can start its own.

Theory of operation. debugpy patches ``os.fork`` only with ``subProcess=True`` (raydebug sets
False: docs/design.md#subprocess), so pydevd's own fork handling never runs: a fork child
inherits the parent's debugger object with dead threads, the forking thread's trace function
and, on 3.12+, that thread's sys.monitoring record (docs/design.md#fork).
:func:`reset_pydevd_after_fork` does what pydevd's fork handling does
(``_on_forked_process`` without tracing) and takes the parent's tracing out of the forking
thread, the child's only thread; the child's first pause then starts pydevd afresh.
"""

from __future__ import annotations

import contextlib
import sys
import threading
from typing import Any


def reset_pydevd_after_fork(py_db: Any) -> None:
    """In a fork child: undo the parent's pydevd ``py_db`` (its debugger, started), closing
    only this process's copies of its client sockets (nothing is sent on them)."""
    for pydevd_thread in (getattr(py_db, "writer", None), getattr(py_db, "reader", None)):
        sock = getattr(pydevd_thread, "sock", None)
        if sock is not None:  # our copy of the parent's client connection: close() only
            with contextlib.suppress(OSError):
                sock.close()
    import debugpy.server.api
    from _pydev_bundle import pydev_monkey
    from _pydevd_bundle.pydevd_constants import PYDEVD_USE_SYS_MONITORING

    if PYDEVD_USE_SYS_MONITORING:  # Python >= 3.12
        from _pydevd_sys_monitoring import pydevd_sys_monitoring

        pydevd_sys_monitoring.stop_monitoring(all_threads=True)
        # The forking thread's own record, with the parent's state (pydevd resets it
        # too when it handles a fork): kept, the child's first stop never happens.
        pydevd_sys_monitoring.reset_thread_local_info()
    pydev_monkey._on_forked_process(setup_tracing=False)  # restores sys.settrace too
    pydev_monkey.undo_patch_thread_modules()
    threading.settrace(None)  # type: ignore[arg-type,unused-ignore]
    sys.settrace(None)
    debugpy.server.api.listen.called = False
