"""Breakpoints set while a process is stopped at ``breakpoint()``, against a real hub and a
real debugged process, on Python 3.11 and 3.12 (sys.monitoring in pydevd).

``breakpoint()`` stops *at its next line, before it runs* (as pdb and stock debugpy's
``debugpy.breakpoint()`` do). So a breakpoint set on a line the thread has not run yet stops
it on ``continue``, whoever set it: the client (``setBreakpoints``) or ``raydebug break``
(the hub's set, which every attached DAP session's pydevd is sent: a child session's, a plain
DAP client's, ``raydebug attach``'s, also when it is made while the client is attached). A
breakpoint on the very line the stop is on is behind the thread: ``continue`` runs that
line, as in pdb and debugpy."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from devtools.ide import IdeLikeClient
from devtools.pythons import SOURCE, python_for
from devtools.terminal import PROMPT, Attach
from helpers import TIMEOUT, HubProcess, finish, line_of, run, write_script
from raydebug.client.dap import DapClient

pytestmark = pytest.mark.integration

JOB = """
def work():
    breakpoint()  # pause here
    a = 1  # stopped here
    b = 2  # breakpoint here
    c = 3
    print("done", a + b + c, flush=True)

work()
"""

VERSIONS = ["3.11", "3.12"]


def start(hub: HubProcess, directory: Path,
          version: str) -> tuple[Path, subprocess.Popen[str], dict[str, Any]]:
    """:data:`JOB` on Python ``version``, pointed at ``hub`` (stopped at teardown), once it
    waits at its ``breakpoint()``: its script, process and session."""
    script = write_script(directory, "job.py", JOB)
    proc = subprocess.Popen([python_for(version), str(script)],
                            env=hub.env(PYTHONPATH=str(SOURCE)), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    hub.workers.append(proc)
    (session,) = hub.wait_sessions(1)
    return script, proc, session


async def attach(hub: HubProcess, session: dict[str, Any]) -> tuple[DapClient, int]:
    """A plain DAP client attached to ``session``, and its stopped thread's id."""
    client = await hub.dap()
    return client, int((await client.attach(session["id"])).body["threadId"])


def raydebug_break(hub: HubProcess, *args: str) -> None:
    made = subprocess.run([sys.executable, "-m", "raydebug", "break", "--hub",
                           hub.client_address, *args], capture_output=True, text=True,
                          timeout=TIMEOUT)
    assert made.returncode == 0, made.stderr


async def set_breakpoint(client: DapClient, script: Path, line: int) -> None:
    made = await client.request("setBreakpoints", {
        "source": {"path": str(script)}, "breakpoints": [{"line": line}]})
    assert made["breakpoints"][0]["verified"], made


async def top_line(client: DapClient, thread_id: int) -> int:
    frames = await client.request("stackTrace", {"threadId": thread_id})
    return int(frames["stackFrames"][0]["line"])


async def continue_to(client: DapClient, thread_id: int) -> tuple[str, int]:
    """``continue``; the next stop's reason and line."""
    await client.request("continue", {"threadId": thread_id})
    stop = await client.wait_event("stopped")
    return stop.body["reason"], await top_line(client, stop.body["threadId"])


async def end(client: DapClient, proc: subprocess.Popen[str], thread_id: int) -> None:
    """Let the process run to its end, and leave."""
    await client.request("continue", {"threadId": thread_id})
    code, out, err = await asyncio.to_thread(finish, proc)
    assert code == 0 and "done 6" in out, err
    await client.close()


@pytest.mark.parametrize("version", VERSIONS)
def test_the_clients_breakpoint_on_a_line_not_run_yet_is_hit(hub: HubProcess, tmp_path: Path,
                                                            version: str):
    script, proc, session = start(hub, tmp_path, version)
    target = line_of(script, "breakpoint here")

    async def scenario() -> None:
        client, thread_id = await attach(hub, session)
        assert await top_line(client, thread_id) == line_of(script, "stopped here")
        await set_breakpoint(client, script, target)
        assert await continue_to(client, thread_id) == ("breakpoint", target)
        await end(client, proc, thread_id)

    run(scenario(), timeout=90)


@pytest.mark.parametrize("version", VERSIONS)
def test_raydebug_break_on_a_line_not_run_yet_stops_a_child_session(hub: HubProcess,
                                                                    tmp_path: Path,
                                                                    version: str):
    script, proc, _ = start(hub, tmp_path, version)
    target = line_of(script, "breakpoint here")

    async def scenario() -> None:
        ide = IdeLikeClient(hub)
        await ide.attach_cluster({})
        child, _, thread_id = await ide.next_child()
        assert await top_line(child, thread_id) == line_of(script, "stopped here")
        await asyncio.to_thread(raydebug_break, hub, f"{script}:{target}")
        assert await continue_to(child, thread_id) == ("breakpoint", target)
        await end(child, proc, thread_id)
        assert ide.parent is not None
        await ide.parent.close()

    try:
        run(scenario(), timeout=90)
    finally:
        raydebug_break(hub, "--clear")


@pytest.mark.parametrize("version", VERSIONS)
def test_a_breakpoint_on_the_line_stopped_at_is_behind_the_thread(hub: HubProcess,
                                                                 tmp_path: Path, version: str):
    """What pdb (``b 4``, ``c`` at ``breakpoint()``'s stop on line 4) and stock debugpy
    (``debugpy.breakpoint()``, then ``setBreakpoints`` on the stopped line and ``continue``)
    do: the line runs, no second stop on it."""
    script, proc, session = start(hub, tmp_path, version)
    stopped_at = line_of(script, "stopped here")

    async def scenario() -> None:
        client, thread_id = await attach(hub, session)
        assert await top_line(client, thread_id) == stopped_at
        await set_breakpoint(client, script, stopped_at)
        await end(client, proc, thread_id)  # would time out had it stopped again
        assert client.events("stopped") == []

    run(scenario(), timeout=90)


def dap_client_continues(hub: HubProcess, session: dict[str, Any], where: str) -> str:
    """A plain DAP client attached to ``session``: ``raydebug break where``, ``continue``;
    ``path:line`` of the next stop, from which it continues to the process's end."""
    async def scenario() -> str:
        client, thread_id = await attach(hub, session)
        try:
            await asyncio.to_thread(raydebug_break, hub, where)
            await client.request("continue", {"threadId": thread_id})
            stop = await client.wait_event("stopped")
            frames = await client.request("stackTrace", {"threadId": stop.body["threadId"]})
            top = frames["stackFrames"][0]
            await client.request("continue", {"threadId": stop.body["threadId"]})
            return f"{top['source']['path']}:{top['line']}"
        finally:
            await client.close()

    return str(run(scenario(), timeout=90))


def terminal_continues(hub: HubProcess, session: dict[str, Any], where: str) -> str:
    """``raydebug attach``: ``raydebug break where``, ``c``; what ``c`` printed (then ``c``
    to the process's end, if it stopped)."""
    term = Attach(hub)
    try:
        term.expect(PROMPT)
        raydebug_break(hub, where)
        printed = term.do_and_end("c", [PROMPT, "has ended"])
        if term.child.after == PROMPT:
            term.do_and_end("c", ["the process runs on", "has ended"])
        return printed
    finally:
        term.close()


@pytest.mark.parametrize("client", [dap_client_continues, terminal_continues])
def test_raydebug_break_on_a_line_not_run_yet_stops_a_plain_session(
        hub: HubProcess, tmp_path: Path, client: Callable[[HubProcess, dict[str, Any], str], str]):
    script, proc, session = start(hub, tmp_path, "3.11")
    target = line_of(script, "breakpoint here")
    try:
        stop = client(hub, session, f"{script}:{target}")
        assert f"{script}:{target}" in stop or f"({target})work()" in stop, stop
    finally:
        raydebug_break(hub, "--clear")
        finish(proc)


def test_a_raydebug_break_logpoint_made_while_attached_prints_in_the_terminal(
        hub: HubProcess, tmp_path: Path):
    """The process's pydevd has the hub's set while ``raydebug attach`` debugs it, so a
    logpoint set then says its line in the terminal (as the client's own would)."""
    script, proc, _ = start(hub, tmp_path, "3.11")
    term = Attach(hub)
    try:
        term.expect(PROMPT)
        raydebug_break(hub, f"{script}:{line_of(script, 'breakpoint here')}", "--log",
                       "logged a={a}")
        printed = term.do_and_end("c", ["the process runs on", "has ended"])
        assert "logged a=1" in printed, printed
        finish(proc)
    finally:
        term.close()
        raydebug_break(hub, "--clear")


def test_a_tbreak_in_a_file_with_a_raydebug_break_is_deleted_when_hit(hub: HubProcess,
                                                                      tmp_path: Path):
    """pydevd renumbers the file's breakpoints when the hub adds the set's beside the
    terminal's: the stop is still known as the ``tbreak``'s, which goes, as in pdb."""
    script, proc, _ = start(hub, tmp_path, "3.11")
    raydebug_break(hub, f"{script}:{line_of(script, 'print(')}")
    term = Attach(hub)
    try:
        term.expect(PROMPT)
        made = term.do(f"tbreak {script}:{line_of(script, 'breakpoint here')}")
        number = made.split("Temporary breakpoint ", 1)[1].split()[0]
        stop = term.do("c")
        assert f"Deleted breakpoint {number} at" in stop, stop
        assert " del " not in term.do("b")
        term.do("c")  # to the raydebug break's line
        term.do_and_end("c", ["the process runs on", "has ended"])
        finish(proc)
    finally:
        term.close()
        raydebug_break(hub, "--clear")
