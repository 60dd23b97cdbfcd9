"""Code that runs inside a debugged process: ``breakpoint()``, post-mortem, the hub link.

Importing this package is cheap (no debugpy, no sockets): the work starts at the first pause.
Every entry point catches its own failures: a user's program sees one line on stderr from
raydebug, never a traceback, and continues.

A forked child (multiprocessing's fork context, a DataLoader worker) is a process of its own:
it drops the agent it inherited (whose link thread did not survive the fork, and whose
sockets are its parent's connections to the hub) and makes its own at its first pause. A fork
waits for the link thread's imports in flight (:mod:`.fork_guard`).

Modules: ``agent`` (what a pause does: its entry points and the wait for a client),
``bookkeeping`` (this process's sessions and pause requests, under one lock), ``pause_all``
(``raydebug pause``: every thread asked), ``arming`` (the hub's breakpoint set armed here),
``config`` (settings from the environment) and ``flags`` (its on/off variables),
``fork_guard`` (imports on the link thread a fork waits for), ``stacks`` (its threads'
stacks, read without pausing; ``own_frames``: the frames of raydebug and pydevd no view
shows), ``metadata`` (what a session says about itself), ``pause_requests`` (a thread
``raydebug pause`` asked, until that ends) and ``pause_signal`` (a main thread blocked in C
brought back to Python to pause), ``report`` (the one line on stderr), ``startup`` (hooks
installed at interpreter start), ``snapshot_sender`` (snapshots captured and sent without
pausing), ``local_pdb`` (a driver's own pdb, whose prompt other
threads print around). Subpackages: ``link`` (the connection to the hub), ``debugger``
(pydevd, reached only through its facade) and ``armed`` (the cluster's breakpoints armed
without pydevd).
"""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Callable
from types import FrameType, TracebackType
from typing import Any

from ..errors import RaydebugError
from ..gil_handoffs import quick_gil_handoffs
from . import fork_guard
from .link import discovery, live
from .report import say

_agent_lock = threading.Lock()
_agent: Any = None  # the process's Agent, created on first use
_given_config: Any = None  # an AgentConfig given by `raydebug link`, not the environment's


def get_agent() -> Any:
    """Return this process's :class:`~raydebug.agent.agent.Agent`, creating it once.

    Raises :class:`~raydebug.errors.ConfigurationError` when the environment is incomplete.
    """
    global _agent
    with _agent_lock:
        if _agent is None:
            with quick_gil_handoffs():  # ~120 modules read: see gil_handoffs
                from .agent import Agent
                from .config import AgentConfig  # not at import: the startup .pth imports us

                config = _given_config or AgentConfig.from_env(
                    in_cluster=discovery.installed().in_cluster())
                _agent = Agent(config)
        return _agent


def _forget_inherited_agent() -> None:
    """At-fork hook, in the child: let go of the parent's agent without touching the
    connections it shares with the parent (closing our copies sends nothing); a live
    parent's child links as a process of its own."""
    global _agent, _agent_lock
    inherited, _agent = _agent, None
    _agent_lock = threading.Lock()  # another thread of the parent may have held it
    if inherited is not None:
        try:
            inherited.abandon_after_fork()
        except Exception as error:  # the child runs on; its pauses may not work
            say(f"internal error after fork ({type(error).__name__}: {error})")
    from . import pause_signal

    pause_signal.forget_after_fork()
    if live.forget_after_fork(parent_pid=_parent_pid):
        start_live_link()


_parent_pid = os.getpid()


def _before_fork() -> None:
    global _parent_pid
    _parent_pid = os.getpid()  # the forking process: its child's parent


os.register_at_fork(before=_before_fork, after_in_child=_forget_inherited_agent)


def start_live_link(identity: dict[str, Any] | None = None, config: Any = None,
                    started: bool = False) -> None:
    """Link this process to the hub from now on, in the background (see :mod:`.link.live`);
    idempotent, never raises. ``identity``: the integration's fields for its record.
    ``config``: the hub to link to (an :class:`~.config.AgentConfig`), for a process whose
    environment does not name it (``raydebug link``); used only if no agent exists yet.
    ``started``: the process has long started (linked from outside): do not wait for it.

    Only the link thread is started here: the agent's modules are imported, and the agent
    made, on that thread, once the process has started, so that a process's start (a Ray
    worker's) does not wait for them (~20 ms of imports; docs/design.md#live-link)."""
    global _given_config
    live.remember(identity)
    if live.is_live():
        return
    live.mark_started()
    if config is not None:
        _given_config = config
    from . import pause_signal  # here: on the main thread, where a handler can be installed

    pause_signal.install()
    thread = threading.Thread(target=_run_live_link, args=(started,), name="raydebug-link",
                              daemon=True)
    thread.pydev_do_not_trace = True  # type: ignore[attr-defined]  # see mark_invisible
    thread.is_pydev_daemon_thread = True  # type: ignore[attr-defined]
    thread.start()


def arm_breakpoints(breakpoints: dict[str, Any]) -> None:
    """Arm the cluster's breakpoints (the hub's wire set) now, on the calling thread: for
    a process that must have them before its first line runs, which its link, coming later,
    would arm too late (a Ray worker's setup hook reads them from the cluster). The link
    arms the hub's set again once connected. Never raises."""
    try:
        get_agent().arm_breakpoints(breakpoints)
    except RaydebugError as error:
        say(f"the cluster's breakpoints are not armed here: {error}")
    except Exception as error:  # raydebug must never break the user's program
        say(f"the cluster's breakpoints are not armed here: internal error "
            f"({type(error).__name__}: {error})")


def retire_live_link() -> None:
    """This process is the hub's own (the Ray hub actor's worker): end its live link, now
    or as soon as the link thread has made the agent. Never raises."""
    global _retired
    _retired = True
    with _agent_lock:
        agent = _agent
    if agent is not None:
        agent.link.retire()
        agent.arm_breakpoints({})  # armed by its setup hook as any Ray worker's: not the hub's


_retired = False


def _run_live_link(started: bool = False) -> None:
    """The link thread of a live process: make the agent, then serve its link here,
    once the process has started (see :func:`.link.live.wait_for_the_start`)."""
    if not started:
        live.wait_for_the_start()
    try:
        with fork_guard.importing():  # a fork waits for them (see fork_guard)
            agent = get_agent()
    except RaydebugError as error:
        say(f"live link off: {error}")
        return
    except Exception as error:  # raydebug must never break the user's program
        say(f"live link off: internal error ({type(error).__name__}: {error})")
        return
    if _retired:
        agent.link.retire()
    agent.link.run_here()


def set_trace(*args: Any, **kwargs: Any) -> None:
    """Pause here and wait for a debugger through the hub (``PYTHONBREAKPOINT`` target).

    Returns at once when raydebug cannot work (the reason is printed); otherwise the calling
    thread stops at the next line, as with ``pdb.set_trace()``.
    """
    pause_at_frame(breakpoint_caller(sys._getframe(1)))


def breakpoint_caller(frame: FrameType) -> FrameType:
    """The frame that called ``breakpoint()``, given the frame that called raydebug's hook:
    the same, unless pydevd's or debugpy's own hook stood between. Importing debugpy's
    pydevd installs those (raydebug puts its own back once pydevd has started); a thread
    that calls ``breakpoint()`` meanwhile goes through one, which hands raydebug's on
    (``PYTHONBREAKPOINT``; ``debugpy.breakpoint`` while pydevd starts, see
    :mod:`.debugger.start`): the session was at pydevd.py:198 (eight threads of a Ray actor
    at once)."""
    while (frame.f_code.co_name, os.path.basename(frame.f_code.co_filename)) in \
            DEBUGGERS_HOOKS and frame.f_back is not None:
        frame = frame.f_back
    return frame


DEBUGGERS_HOOKS = frozenset({("pydevd_breakpointhook", "pydevd.py"),
                             ("debugpy_breakpointhook", "force_pydevd.py")})


def pause_at_frame(frame: FrameType) -> None:
    """:func:`set_trace` for a given frame (for hooks that stand between the user and us)."""
    _guarded(lambda: get_agent().pause_at(frame))


def driver_breakpoint(*args: Any, **kwargs: Any) -> None:
    """``breakpoint()`` in a Ray driver: a local pdb when stdin is a terminal (as Ray users
    expect), otherwise, or with ``RAYDEBUG_DRIVER=remote``, a raydebug session."""
    frame = breakpoint_caller(sys._getframe(1))
    local = os.environ.get("RAYDEBUG_DRIVER", "").lower() != "remote"
    if local and sys.stdin is not None and sys.stdin.isatty():
        from .local_pdb import LocalPdb

        LocalPdb().set_trace(frame)
    else:
        pause_at_frame(frame)


def post_mortem(error: BaseException | TracebackType | None = None) -> None:
    """Freeze in the frame where ``error`` (default: the exception being handled) was raised,
    until a debugger attached through the hub resumes it."""
    exc_info = _exc_info(error)
    if exc_info is None:
        say("post_mortem() called with no exception to inspect; continuing")
        return
    _guarded(lambda: get_agent().pause_on_exception(exc_info))


def install_excepthook() -> None:
    """Freeze on uncaught exceptions, in the main thread and in threads (then report them
    as Python would). Installing twice changes nothing."""
    chain_excepthooks(lambda error, thread: post_mortem(error), "raydebug")


def install_snapshot_hooks() -> None:
    """Send a snapshot of every uncaught exception (``RAYDEBUG_SNAPSHOTS``), in the main
    thread and in threads, then report it as Python would. Installing twice changes
    nothing."""
    chain_excepthooks(lambda error, thread: snapshot_failure(
        error, thread.name if thread is not None else None), "raydebug_snapshots")


def snapshot_failure(error: BaseException, thread_name: str | None = None,
                     identity: dict[str, Any] | None = None,
                     start: TracebackType | None = None) -> None:
    """Send a snapshot of ``error`` (see :mod:`.snapshot_sender`; ``identity``: the failing
    task's ids, when the caller knows them; ``start``: the traceback entry the user's
    frames start at, when the caller ran them) and return at once. Never raises: what goes
    wrong is one line on stderr."""
    try:
        link = get_agent().link
    except RaydebugError as problem:  # no hub configured: the failure goes on as it is
        say(f"{problem}; no snapshot taken")
        return
    except Exception as problem:  # raydebug must never break the user's program
        say(f"internal error ({type(problem).__name__}: {problem}); no snapshot taken")
        return
    from .snapshot_sender import send_failure

    send_failure(error, link, thread_name, identity, start)  # (never raises)


def chain_excepthooks(on_uncaught: Callable[[BaseException, threading.Thread | None], object],
                      marker: str) -> None:
    """Call ``on_uncaught(error, thread)`` for every uncaught exception (but
    ``KeyboardInterrupt`` and ``SystemExit``), in the main thread (``thread`` None) and in
    threads, then the hooks installed before, which report it as Python would. Installed
    once per ``marker``."""
    if getattr(sys.excepthook, marker, False):
        return
    previous_hook = sys.excepthook
    previous_thread_hook = threading.excepthook

    def excepthook(kind: type[BaseException], value: BaseException,
                   tb: TracebackType | None) -> None:
        if not isinstance(value, (KeyboardInterrupt, SystemExit)):
            on_uncaught(value, None)
        previous_hook(kind, value, tb)

    def thread_excepthook(args: threading.ExceptHookArgs) -> None:
        if args.exc_value is not None and not isinstance(args.exc_value, SystemExit):
            on_uncaught(args.exc_value, args.thread)
        previous_thread_hook(args)

    setattr(excepthook, marker, True)
    sys.excepthook = excepthook
    threading.excepthook = thread_excepthook


def _exc_info(
    error: BaseException | TracebackType | None,
) -> tuple[type[BaseException], BaseException, TracebackType] | None:
    if error is None:
        error = sys.exc_info()[1]
    if isinstance(error, TracebackType):
        value = sys.exc_info()[1]
        if value is None or value.__traceback__ is not error:
            return None  # a bare traceback without its exception: nothing to show
        error = value
    if error is None or error.__traceback__ is None:
        return None
    return type(error), error, error.__traceback__


def _guarded(pause: Any) -> None:
    try:
        pause()
    except RaydebugError as error:
        say(f"{error}; continuing without debugging")
    except Exception as error:  # raydebug must never break the user's program
        say(f"internal error ({type(error).__name__}: {error}); continuing without debugging")
