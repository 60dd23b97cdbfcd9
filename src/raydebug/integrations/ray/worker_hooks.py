"""What runs in every Ray process raydebug enables: the worker setup hook, the driver hook,
and the hub discovery they install for the agent.

Theory of operation. In a worker, :func:`setup_worker` (the job's
``worker_process_setup_hook``, which runs after Ray's own set-up points ``PYTHONBREAKPOINT``
at Ray's debugger) makes ``breakpoint()`` call raydebug, and replaces Ray's post-mortem
entry points (``ray.util.pdb._is_ray_debugger_post_mortem_enabled`` / ``_post_mortem``,
which Ray's task executor calls on a task or actor exception) so that a failing task
sends a snapshot when ``RAYDEBUG_SNAPSHOTS=1`` and freezes as a raydebug session when
``RAYDEBUG_POST_MORTEM=1`` or ``RAY_DEBUG_POST_MORTEM=1``.
In a driver, :func:`install_driver_hook` routes ``breakpoint()``. Both install
:class:`RayDiscovery`, through which the agent finds the cluster's hub and the task's
identities without importing this package.
"""

from __future__ import annotations

import os
import sys
from types import TracebackType
from typing import Any

import ray

from ...agent import fork_guard
from ...agent.flags import is_on
from ...agent.link import discovery
from ...agent.link.discovery import HubAddress, LocalDiscovery
from ...agent.own_frames import is_standard_library
from ...errors import HubUnreachableError, RaydebugError
from .children import watch_children
from .metadata import current_activity, in_ray_worker, left_ray, live_identity, session_fields

LIVE_IN_RAY = "ray"  # RAYDEBUG_LIVE in a job's workers: the setup hook links them, not the .pth
RAY_DIR = os.path.dirname(ray.__file__) + os.sep
RAY_CYTHON_SOURCES = "python/ray/"  # co_filename of a traceback's _raylet.pyx frames


def live_wanted() -> bool:
    """The live link is on in Ray unless ``RAYDEBUG_LIVE=0`` (or false, no, off)."""
    return os.environ.get("RAYDEBUG_LIVE", "").strip().lower() not in ("0", "false", "no",
                                                                        "off")


def setup_worker() -> None:
    """Worker setup hook: breakpoint() and post-mortem go to raydebug, in this worker and
    in the processes it starts."""
    from ...agent import set_trace

    sys.breakpointhook = set_trace
    os.environ["PYTHONBREAKPOINT"] = "raydebug.set_trace"  # for processes this one starts
    # Inherited when `raydebug run`'s driver started the cluster; its children are no drivers.
    os.environ.pop("RAYDEBUG_RAY_DRIVER", None)
    ray_pdb = ray.util.pdb
    ray_pdb._is_ray_debugger_post_mortem_enabled = failure_hook_wanted
    ray_pdb._post_mortem = on_task_failure
    discovery.install(RayDiscovery())
    watch_children()
    if sys.version_info < (3, 12):  # functions shipped by value get armed code (3.10/3.11)
        from ...agent.armed.shipped import made
        from .shipped_functions import follow

        follow(made)
    if live_wanted():  # (without a link, nothing would disarm them)
        from ...agent import start_live_link

        arm_published_breakpoints()
        start_live_link(live_identity())
        os.environ["RAYDEBUG_LIVE"] = "1"  # the processes it starts link through the .pth


def arm_published_breakpoints() -> None:
    """Arm the cluster's breakpoints, as the hub published them, before this process's first
    task runs: its link comes only once the process has started (see
    :func:`raydebug.agent.link.live.wait_for_the_start`), and a task that fails at once must
    still meet the IDE's "uncaught" filter. One read of the KV; the arm is imported only when
    there are breakpoints. Never raises."""
    try:
        from .kv import read_published_breakpoints

        breakpoints = read_published_breakpoints()
    except Exception as error:  # Ray's errors are many; the link arms them later
        from ...agent.report import say

        say(f"could not read the cluster's breakpoints ({type(error).__name__}: {error}); "
            "they come with the hub's link")
        return
    if breakpoints:
        from ...agent import arm_breakpoints

        arm_breakpoints(breakpoints)


def snapshots_enabled() -> bool:
    return is_on(os.environ.get("RAYDEBUG_SNAPSHOTS"))


def post_mortem_enabled() -> bool:
    return any(is_on(os.environ.get(name))
               for name in ("RAYDEBUG_POST_MORTEM", "RAY_DEBUG_POST_MORTEM"))


def failure_hook_wanted() -> bool:
    """Whether Ray's task executor should call :func:`on_task_failure` on a task's
    exception: post-mortem or snapshots are on."""
    return post_mortem_enabled() or snapshots_enabled()


def on_task_failure() -> None:
    """Called by Ray inside its handler of a task's or actor method's exception: send a
    snapshot (``RAYDEBUG_SNAPSHOTS``; the task fails at once after it), then freeze
    post-mortem if that is on too."""
    if snapshots_enabled():
        from ...agent import snapshot_failure

        error = sys.exc_info()[1]
        if error is not None:
            snapshot_failure(error, identity=failing_task_fields(error),
                             start=user_traceback(error))
    if post_mortem_enabled():
        post_mortem()


def failing_task_fields(error: BaseException) -> dict[str, Any] | None:
    """The failing task's identities (see :func:`.metadata.session_fields`), its name taken
    from the traceback for an actor's method: an async actor runs several methods at once,
    and its runtime context then names the one that started last, not the one that failed
    (the task's id is unknown then: None). None when Ray cannot say (the caller asks again)."""
    try:
        fields = session_fields()
    except Exception:  # Ray's errors are many
        return None
    actor_class = fields.get("actor_class")
    tb = error.__traceback__
    while actor_class and tb is not None:  # the outermost frame of the actor's own methods
        receiver = tb.tb_frame.f_locals.get("self")
        if receiver is not None and type(receiver).__name__ == actor_class \
                and not tb.tb_frame.f_code.co_filename.startswith(RAY_DIR):  # (wrappers)
            name = f"{actor_class}.{tb.tb_frame.f_code.co_name}"
            if name != fields.get("task_name"):
                fields.update(task_name=name, task_id=None, attempt=None)
            break
        tb = tb.tb_next
    return fields


def user_traceback(error: BaseException) -> TracebackType | None:
    """The entry of ``error``'s traceback where the user's frames start: past the frames of
    Ray's task executor that ran the task and caught its exception (the frames Cython adds
    for ``_raylet.pyx``, Ray's Python wrappers, and the standard library they called:
    ``concurrent.futures`` for an async actor). The whole traceback when nothing else is
    in it. Post-mortem, likewise, starts from the raising frame and its callers, never
    from these."""
    tb = error.__traceback__
    while tb is not None and _runs_tasks(tb.tb_frame.f_code.co_filename):
        tb = tb.tb_next
    return tb or error.__traceback__


def _runs_tasks(path: str) -> bool:
    return path.startswith((RAY_DIR, RAY_CYTHON_SOURCES)) or is_standard_library(path)


def post_mortem() -> None:
    """Called by Ray inside its handler of a task's exception: freeze in the raising frame.
    The task's error still reaches the caller once the session ends."""
    from ...agent import post_mortem as freeze

    freeze()


def install_driver_hook() -> None:
    """Route the driver's ``breakpoint()`` (see :func:`raydebug.agent.driver_breakpoint`).
    Ray only sets ``PYTHONBREAKPOINT``, which a replaced ``sys.breakpointhook`` ignores."""
    from ...agent import driver_breakpoint

    sys.breakpointhook = driver_breakpoint
    discovery.install(RayDiscovery())
    keep_worker_logs_off_the_prompt()
    if live_wanted():
        if ray.is_initialized():
            link_driver()
        elif link_driver not in ray._private.worker._post_init_hooks:
            # The driver links as soon as it is connected, finding or starting the hub:
            # `raydebug ps` works before anything pauses.
            ray._private.worker._post_init_hooks.append(link_driver)


def link_driver() -> None:
    """Arm the cluster's breakpoints and link the driver (once connected to Ray) to the
    cluster's hub, in the background."""
    from ...agent import start_live_link

    try:
        identity = live_identity()
    except Exception:  # Ray's errors are many; the link works without the ids
        identity = {}
    arm_published_breakpoints()
    start_live_link(identity)


def keep_worker_logs_off_the_prompt() -> None:
    """The workers' log lines that Ray prints in the driver (a pause notice among them)
    appear above the driver's local pdb prompt, which is drawn again after them (see
    :mod:`raydebug.agent.local_pdb`), not after it. Ray's printer thread calls
    ``ray._private.worker.print_worker_logs`` by its module name for every batch."""
    from ...agent.local_pdb import print_above_prompt

    worker = ray._private.worker
    original = worker.print_worker_logs
    if getattr(original, "raydebug", False):
        return

    def print_worker_logs(data: Any, print_file: Any, ignore_prefix: bool = False) -> None:
        if not data.get("lines"):  # nothing to print: no need to draw the prompt again
            original(data, print_file, ignore_prefix)
            return

        def write() -> None:
            original(data, print_file, ignore_prefix)
            print_file.flush()

        print_above_prompt(write)

    print_worker_logs.raydebug = True  # type: ignore[attr-defined]
    worker.print_worker_logs = print_worker_logs


class RayDiscovery:
    """The agent's :class:`~raydebug.agent.link.discovery.HubDiscovery` in a Ray worker or
    driver: the hub through the cluster's KV (started as an actor if need be), the
    identities from Ray's runtime context. A fork child, whose Ray connection does not
    work, answers as a process the task started (:class:`LocalDiscovery`)."""

    def in_cluster(self) -> bool:
        return in_ray_worker()

    def find_hub(self, stale: object = None, start: bool = True) -> HubAddress:
        try:
            with fork_guard.importing():  # on the link thread, not at the setup hook
                from .hub_actor import find_or_start_hub
            return find_or_start_hub(stale=stale, start=start).address()
        except RaydebugError:
            raise
        except Exception as error:  # Ray's, once this process lost its cluster (it stopped)
            raise HubUnreachableError(
                f"cannot ask the Ray cluster for its hub ({type(error).__name__}: {error})"
            ) from None

    def process_identity(self) -> dict[str, Any]:
        if in_ray_worker():
            return session_fields()
        return LocalDiscovery().process_identity()

    def left_cluster(self) -> bool:
        return left_ray()

    # A driver's threads that print its workers' lines and errors (ray._private.worker):
    # Ray's code only, which a pause or a stop of the driver leaves running.
    service_threads = frozenset({"ray_print_logs", "ray_listen_error_messages"})

    def current_activity(self) -> dict[str, Any]:
        """What this worker runs now (see :func:`.metadata.current_activity`)."""
        return current_activity()
