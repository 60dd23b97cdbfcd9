"""The commands about live processes: ``ps``, ``stacks``, ``pause`` and ``continue``.

They parse, ask the hub (``/api/processes``, ``/api/stacks``, ``/api/pause``,
``/api/continue``) and hand
plain data to :mod:`raydebug.views_processes`. A selector that matches nothing is one red
line, then what there is, and exit status 1.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, NoReturn, TypeVar

import click

from ..client import hub_api
from ..errors import HubUnreachableError, NoProcessMatchError, RemoteProtocolError
from .help_format import FittedExamplesCommand
from .locate import HubLocation, locate_hub, saying_how_to_get_a_hub
from .options import CLIENT_TOKEN_OPTION, HUB_OPTION, RAY_ADDRESS_OPTION
from .output import error

if TYPE_CHECKING:
    from ..selectors import Selector

MAIN_THREAD = "MainThread"  # threading.main_thread()'s name, as sessions record it
KNOWN_SHOWN = 25  # lines under "no process matches" (the hub sends 20 and "... N more")

SELECTOR_HELP = ("SELECTOR terms are KEY=VALUE and must all match. Keys: pid, host, node (id "
                 "prefix or address), job, actor (class), task (name), rank (3, 0-7 or "
                 "1,5,9), or any label key (RANK, LOCAL_RANK, RAYDEBUG_LABEL_<KEY>...).")


def _epilog(*examples: str) -> str:
    """The selector keys, then examples kept as written (click's ``\\b``)."""
    return SELECTOR_HELP + "\n\n\b\nExamples:\n" + "\n".join(f"  {e}" for e in examples)


SELECTOR = click.argument("selector", nargs=-1, metavar="[SELECTOR]...")


def _check_terms(selector: Sequence[str]) -> None:
    """A malformed term is caught here, before asking the hub (:class:`SelectorError`:
    one red line naming the term and the keys). No terms: nothing to import (the
    selectors' dataclasses are ~3 ms of a command's start)."""
    if selector:
        parse_selector(selector)


def parse_selector(selector: Sequence[str]) -> Selector:
    from ..selectors import parse

    return parse(selector)


def _no_match(failure: NoProcessMatchError, location: HubLocation) -> NoReturn:
    """The hub's one line, naming the hub and how it was found (another hub than meant,
    such as one started on this machine, lists other processes), then briefly what there
    is; exit status 1."""
    from ..views_processes import brief_process  # rendering: imported where it is used

    error(f"{failure} on the hub at {location.describe()}")
    known = failure.known
    if not known:
        click.echo("  no process is linked to this hub", err=True)
    for entry in known[:KNOWN_SHOWN]:
        line = brief_process(entry) if isinstance(entry, dict) else entry
        click.echo(f"  {line}", err=True)
    if len(known) > KNOWN_SHOWN:
        click.echo(f"  … and {len(known) - KNOWN_SHOWN} more (raydebug ps)", err=True)
    sys.exit(1)


T = TypeVar("T")


def _ask(location: HubLocation, question: Callable[[], T]) -> T:
    """``question()``'s answer; a selector that matches nothing ends the command (see
    :func:`_no_match`), and a hub nobody named and nobody answers at says how to get one."""
    try:
        with saying_how_to_get_a_hub(location):
            return question()
    except NoProcessMatchError as failure:
        _no_match(failure, location)


def _console() -> Any:
    from rich.console import Console  # imported here: --json output stays quick

    return Console()


def _print_table(console: Any, table: Any) -> None:
    """Print a table of :func:`raydebug.views.fitted_table` (its title and header styled by
    rich; each row a line cut to the width already, written as it is: rich takes ~0.2 ms a
    line, seconds for the 10,000 processes of a large job)."""
    from rich.console import Group
    from rich.text import Text

    parts = list(table.renderables) if isinstance(table, Group) else []
    texts = [part for part in parts if isinstance(part, Text)]
    if len(parts) < 2 or len(texts) != len(parts):
        console.print(table)
        return
    console.print(*texts[:2], sep="\n")
    sys.stdout.write("".join(f"{row.plain}\n" for row in texts[2:]))
    sys.stdout.flush()


@click.command("ps", cls=FittedExamplesCommand, epilog=_epilog(
    "raydebug ps                     every linked process, running or paused",
    "raydebug ps rank=0-3            ranks 0 to 3",
    "raydebug ps task=preprocess     the Ray workers running that task now",
    "raydebug ps --json host=node-2  for scripts: the process records"))
@HUB_OPTION
@RAY_ADDRESS_OPTION
@CLIENT_TOKEN_OPTION
@click.option("--json", "as_json", is_flag=True,
              help="Print the process records as JSON (one line, as the hub sent them).")
@click.option("--argv", "full_argv", is_flag=True,
              help="Each process's whole command line (listed: its first words, ~160 "
                   "characters).")
@SELECTOR
def ps(hub: str | None, ray_address: str | None, client_token: str | None, as_json: bool,
       full_argv: bool, selector: tuple[str, ...]) -> None:
    """List the live processes: every process raydebug links (under `raydebug run`, or
    with RAYDEBUG_LIVE=1), running or paused, with its sessions and what it runs now."""
    _check_terms(selector)
    location = locate_hub(hub, ray_address)
    found: list[dict[str, Any]] = []
    if as_json:
        # The hub's answer is the JSON asked for: passed on as it came (one line), since
        # decoding and encoding again 10,000 records would take most of the time.
        raw = _ask(location, lambda: hub_api.request_raw(
            location.address, hub_api.processes_path(selector, full_argv=full_argv),
            token=client_token))
        if not (selector and raw.strip() == b"[]"):
            sys.stdout.buffer.write(raw.rstrip() + b"\n")
            sys.stdout.flush()
            return
    else:
        found = _ask(location, lambda: hub_api.processes(location.address, selector,
                                                         client_token, full_argv=full_argv))
    from ..views_processes import brief_process, processes_table

    if selector and not found:
        known = hub_api.processes(location.address, (), client_token, now=False)
        _no_match(NoProcessMatchError(
            f"no process matches {parse_selector(selector).text}",
            [brief_process(p) for p in known]), location)
    console = _console()
    _print_table(console, processes_table(
        found, width=console.width, hub=location.address, found_by=location.found_by))
    if not selector:
        _say_unlinked(location, found)


def _say_unlinked(location: HubLocation, listed: list[dict[str, Any]]) -> None:
    """Under `ps` and `stacks` of a Ray cluster's hub: how many of its workers are not in
    ``listed`` (the hub's processes), and the `raydebug link` that adds them (a job started
    without raydebug is all of them)."""
    if location.gcs:
        from ..integrations.ray.link_jobs import unlinked_line

        notice = unlinked_line(location.gcs, listed)
        if notice:
            click.echo(notice)


@click.command(cls=FittedExamplesCommand, epilog=_epilog(
    "raydebug stacks                      every thread of every process, merged",
    "raydebug stacks rank=0-7             only these ranks",
    "raydebug stacks --locals task=train  with each frame's locals",
    "raydebug stacks --json               per process, per thread, for scripts",
    "raydebug stacks --native             those that do not answer read by py-spy"))
@HUB_OPTION
@RAY_ADDRESS_OPTION
@CLIENT_TOKEN_OPTION
@click.option("--json", "as_json", is_flag=True,
              help="Print every process's threads and frames (outermost first) and the "
                   "merged tree as JSON.")
@click.option("--locals", "with_locals", is_flag=True,
              help="Add each frame's local variables (short reprs).")
@click.option("--timeout", default=2.0, show_default=True, type=click.FloatRange(min=0.1),
              metavar="SECONDS",
              help="How long a process may take to answer; one that does not (its GIL "
                   "held by C code) is listed apart, with the reason.")
@click.option("--native", is_flag=True,
              help="Read the processes that do not answer from outside with py-spy "
                   "(installed apart; needs ptrace rights), C frames included, and merge "
                   "them into the tree: this machine's, and on a Ray cluster each node's "
                   "through a task there.")
@SELECTOR
def stacks(hub: str | None, ray_address: str | None, client_token: str | None,
           as_json: bool, with_locals: bool, timeout: float, native: bool,
           selector: tuple[str, ...]) -> None:
    """Show where every thread of the selected processes is, without pausing them.

    Identical stacks are merged into one tree with counts, so the odd ones out (a rank
    stuck in a lock while the others wait in allreduce) stand apart, in red. Read in each
    process by raydebug's own thread: no ptrace, and a thread blocked in C (a lock,
    ray.get, a socket) shows where it waits."""
    _check_terms(selector)
    location = locate_hub(hub, ray_address)
    answer = _ask(location, lambda: hub_api.stacks(location.address, selector, with_locals,
                                                   timeout, client_token))
    if native:
        answer = _read_from_outside(answer, timeout, location)
    if as_json:
        click.echo(json.dumps(answer, indent=2))
        return
    from ..views_processes import stacks_view

    console = _console()
    console.print(stacks_view(answer, console.width, with_locals, hub=location.address))
    if not selector:
        _say_unlinked(location, [entry.get("process") or {}
                                 for entry in answer.get("processes") or ()])


def _read_from_outside(answer: dict[str, Any], timeout: float,
                       location: HubLocation) -> dict[str, Any]:
    """``stacks --native``: the processes that did not answer read by py-spy (those of a
    Ray node on their node, when the hub is a cluster's), a yellow line on stderr for
    each place that could not be read."""
    from ..outside_stacks import NodeReader, Reading, read_unanswered

    nodes: NodeReader | None = None
    gcs = location.gcs
    if gcs is not None:
        from ..integrations.ray.node_stacks import read_on_nodes

        def nodes(pids: dict[str, list[int]], seconds: float) -> dict[str, Reading]:
            return read_on_nodes(gcs, pids, seconds)

    answer, notice = read_unanswered(answer, timeout, nodes=nodes)
    for line in notice.splitlines():
        click.secho(line, fg="yellow", err=True)
    return answer


@click.command(cls=FittedExamplesCommand, epilog=_epilog(
    "raydebug pause rank=1            pause rank 1, then: raydebug attach",
    "raydebug pause task=preprocess   the Ray workers running that task now",
    "raydebug pause pid=4242 host=node-2",
    "raydebug pause --cancel pid=4242  withdraw its pause, if nothing stopped yet"))
@HUB_OPTION
@RAY_ADDRESS_OPTION
@CLIENT_TOKEN_OPTION
@click.option("--wait", "wait_seconds", default=5.0, show_default=True,
              type=click.FloatRange(min=0), metavar="SECONDS",
              help="Wait this long for the sessions to be listed, and print their ids; "
                   "a thread that has not stopped by then is no longer asked, unless "
                   "--keep (0: do not wait, keep the request).")
@click.option("--keep", is_flag=True,
              help="Keep asking the threads that have not stopped within --wait (a "
                   "thread that holds the GIL in C): each stops when it runs Python again "
                   "(`raydebug pause --cancel` withdraws).")
@click.option("--cancel", is_flag=True,
              help="Withdraw the pauses of the selected processes that have not stopped "
                   "yet (`raydebug ps`: pause requested).")
@SELECTOR
def pause(hub: str | None, ray_address: str | None, client_token: str | None,
          wait_seconds: float, keep: bool, cancel: bool, selector: tuple[str, ...]) -> None:
    """Pause the selected running processes (all their Python threads): each thread that
    stops becomes a session with reason `pause`, which `raydebug attach`, VS Code and
    nvim-dap debug as any other. Detaching resumes it. A thread blocked in C (a lock, a
    queue, `ray.get`) is a session too, marked blocked in C, its stack and locals readable
    where it waits; it stops when the call returns. Threads that run only library code
    (Ray's own) are left to run."""
    if not selector:
        raise click.UsageError("pause needs at least one SELECTOR term (e.g. rank=1, "
                               "pid=4242, task=train): it never pauses every process by "
                               "default; `raydebug ps` lists them")
    _check_terms(selector)
    location = locate_hub(hub, ray_address)
    if cancel:
        _cancel_pauses(location.address, selector, client_token)
        return
    expire = 0.0 if keep else wait_seconds
    answer = _ask(location, lambda: hub_api.pause(location.address, selector, client_token,
                                                  expire=expire))
    paused = [str(p) for p in answer.get("paused") or []]
    already = [str(p) for p in answer.get("already_paused") or []]
    sessions = (_wait_sessions(location.address, paused, wait_seconds, client_token)
                if paused and wait_seconds > 0 else {})
    unstopped = [p for p in paused if p not in sessions] if wait_seconds else []
    pids = _pids(location.address, client_token) if unstopped else {}
    width = _stdout_width()
    for process in paused:
        found = sessions.get(process)
        if process in unstopped and not keep:  # nothing left paused, nor asked
            click.echo(f"{process}{_not_stopped(pids.get(process), keep)}")
            continue
        if found:
            click.echo(paused_line(process, found, width))
            continue
        where = _not_stopped(pids.get(process), keep) if process in unstopped else ""
        click.echo(f"paused {process}{where}")
    for process in already:
        click.echo(f"{process} was paused already")
    failed = answer.get("failed") or {}
    for process, reason in failed.items():
        error(f"could not pause {process}: {reason}")
    if failed:
        sys.exit(1)


@click.command("continue", cls=FittedExamplesCommand, epilog=_epilog(
    "raydebug continue rank=0-7       every paused thread of ranks 0 to 7 runs on",
    "raydebug continue job=02000000   the whole job",
    "raydebug continue --all          every paused process of the hub"))
@HUB_OPTION
@RAY_ADDRESS_OPTION
@CLIENT_TOKEN_OPTION
@click.option("--all", "everything", is_flag=True,
              help="Every paused process of the hub (no SELECTOR).")
@SELECTOR
def continue_command(hub: str | None, ray_address: str | None, client_token: str | None,
                     everything: bool, selector: tuple[str, ...]) -> None:
    """Let every paused thread of the selected processes run on, as a debugger's
    `continue` would: one line per session continued, then the count. A process a
    debugger is attached to is left to it (said, with the others continued)."""
    if not selector and not everything:
        raise click.UsageError("continue needs a SELECTOR (e.g. rank=0-7, job=02000000) "
                               "or --all; `raydebug list` lists the paused sessions")
    _check_terms(selector)
    location = locate_hub(hub, ray_address)
    nothing = (f"no paused session in the processes matching {' '.join(selector)}"
               if selector else "no paused session")
    try:
        with saying_how_to_get_a_hub(location):
            answer = hub_api.continue_sessions(location.address, selector, client_token)
    except NoProcessMatchError as failure:
        if selector:  # what there is, as pause and stacks say it
            _no_match(failure, location)
        error(f"{nothing} on the hub at {location.describe()}")
        sys.exit(1)
    from ..views import continued_lines

    if not answer["resumed"] and not answer.get("not_resumed"):
        error(f"{nothing} on the hub at {location.describe()}"
              + (": they run" if selector else ""))
        sys.exit(1)
    console = _console()  # fitted to a terminal; a pipe's lines are as they always were
    out, missed = continued_lines(answer, console.width if console.is_terminal else None)
    click.echo("\n".join(out))
    for line in missed:
        error(line)
    if not answer["resumed"]:
        sys.exit(1)


def paused_line(process: str, sessions: list[str], width: int | None) -> str:
    """``raydebug pause``'s line for a process whose threads stopped as ``sessions`` (the
    main thread's first): each id, and the command that attaches to the first; a line wider
    than ``width`` (a terminal's) says the command first and each id once, so that no id is
    cut by the terminal's wrap (found by use at 60 columns: 'raydebug attach 23f0' /
    '9d5a63cc')."""
    line = f"paused {process}: session {', '.join(sessions)} (raydebug attach {sessions[0]})"
    if width is None or len(line) <= width:
        return line
    others = f" (also {', '.join(sessions[1:])})" if len(sessions) > 1 else ""
    return f"paused {process}: raydebug attach {sessions[0]}{others}"


def _stdout_width() -> int | None:
    """The terminal's columns when stdout is one, else None (a pipe's lines stay whole)."""
    import shutil

    return shutil.get_terminal_size().columns if sys.stdout.isatty() else None


def _not_stopped(pid: int | None, kept: bool) -> str:
    """Why a paused process has no session yet, what became of its request, and where to
    look."""
    stacks = f"raydebug stacks pid={pid}" if pid is not None else "raydebug stacks"
    selector = f"pid={pid}" if pid is not None else "SELECTOR"
    if kept:
        return (": no thread has stopped yet; each stops when it returns to Python "
                f"(`raydebug pause --cancel {selector}` withdraws; {stacks} shows where "
                "each waits)")
    return (": no thread stopped in time, the pause is withdrawn (--keep keeps it; "
            f"{stacks} shows where each waits)")


def _cancel_pauses(hub: str, selector: tuple[str, ...], token: str | None) -> None:
    """``raydebug pause --cancel``: withdraw the selected processes' pending pauses, and
    say of how many threads each."""
    answer = hub_api.pause(hub, selector, token, cancel=True)
    for process, threads in (answer.get("cancelled") or {}).items():
        click.echo(f"{process}: withdrew the pause of {threads} "
                   f"thread{'s' if threads != 1 else ''}" if threads
                   else f"{process}: no pause pending")
    failed = answer.get("failed") or {}
    for process, reason in failed.items():
        error(f"could not withdraw the pause of {process}: {reason}")
    if failed:
        sys.exit(1)


def _pids(hub: str, token: str | None) -> dict[str, int]:
    """Each linked process's pid, by process id (empty if the hub cannot say now)."""
    try:
        known = hub_api.processes(hub, (), token, now=False)
    except (HubUnreachableError, RemoteProtocolError):
        return {}
    return {str(p.get("id")): p["pid"] for p in known if isinstance(p.get("pid"), int)}


def _wait_sessions(hub: str, processes: list[str], seconds: float, token: str | None
                   ) -> dict[str, list[str]]:
    """The session ids of each of ``processes``, its main thread's first, once every one
    has its main thread's session, or what there is after ``seconds``. The main thread's
    is the one to attach to: it runs the task, while the thread that stops first is often
    Ray's own (its GC thread, blocked in C). Waits on the hub (``/api/sessions?min=N``),
    never polls in a sleep loop."""
    deadline = time.monotonic() + seconds
    while True:
        listed = hub_api.list_sessions(hub, token=token)
        mine: dict[str, list[dict[str, Any]]] = {}
        for session in listed:
            if session.get("process") in processes:
                mine.setdefault(str(session["process"]), []).append(session)
        main_stopped = all(any(_of_main_thread(s) for s in mine.get(p, ())) for p in processes)
        left = deadline - time.monotonic()
        if main_stopped or left <= 0:
            return {process: [str(s.get("id")) for s in sorted(
                        sessions, key=lambda s: not _of_main_thread(s))]
                    for process, sessions in mine.items()}
        # Returns as soon as one more session exists than now (ours, or another's).
        hub_api.list_sessions(hub, len(listed) + 1, left, token)


def _of_main_thread(session: dict[str, Any]) -> bool:
    """Whether ``session`` is its process's main thread's (a record that names no thread is
    taken as the main thread's: nothing says it is another's)."""
    return session.get("thread") in (MAIN_THREAD, "", None)
