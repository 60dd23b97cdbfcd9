"""Debug one session through the hub as a test does it most often: attach, evaluate an
expression in the paused frame, continue, disconnect; and read a suspended thread's top frame
and its locals."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from raydebug.client.dap import DapClient
from raydebug.errors import DapRequestError


async def attach(host: str, port: int, session_id: str | None,
                 timeout: float = 30) -> tuple[DapClient, dict[str, Any]]:
    """A client attached to ``session_id`` (None: the oldest waiting session); return it and
    the ``stopped`` event's body.

    An attach at a process's very first pause can fail with "closed its channel" when
    pydevd cannot start in time under load; the session stays attachable, so this tries
    again, at most twice.
    """
    for attempt in range(3):
        client = await DapClient.connect(host, port)
        await client.initialize()
        try:
            stopped = await client.attach(session_id, timeout=timeout)
            return client, stopped.body
        except DapRequestError as error:
            await client.close()
            if "closed its channel" not in str(error) or attempt == 2:
                raise
    raise AssertionError("unreachable")


@dataclass
class Evaluated:
    """What :func:`evaluate_and_continue` saw: the result, the ``stopped`` event's body
    and the top stack frame it was evaluated in."""

    result: str
    stopped: dict[str, Any]
    top: dict[str, Any]


async def evaluate_and_continue(host: str, port: int, session_id: str | None,
                                expression: str, timeout: float = 30) -> Evaluated:
    """Attach to ``session_id``, evaluate ``expression`` in its top frame, continue its
    thread, disconnect."""
    client, stopped = await attach(host, port, session_id, timeout)
    try:
        thread_id = stopped["threadId"]
        frames = await client.request("stackTrace", {"threadId": thread_id})
        top = frames["stackFrames"][0]
        value = await client.request("evaluate", {
            "expression": expression, "frameId": top["id"], "context": "repl"})
        await client.request("continue", {"threadId": thread_id})
        await client.request("disconnect", {})
    finally:
        await client.close()
    return Evaluated(str(value["result"]), stopped, top)


async def top_frame(client: DapClient, thread_id: int) -> dict[str, Any]:
    """The top frame of suspended thread ``thread_id`` (DAP ``stackTrace``)."""
    frames = await client.request("stackTrace", {"threadId": thread_id})
    return dict(frames["stackFrames"][0])


async def locals_of(client: DapClient, frame_id: int) -> dict[str, str]:
    """Frame ``frame_id``'s locals as pydevd shows them: name -> repr."""
    scopes = await client.request("scopes", {"frameId": frame_id})
    local = next(s for s in scopes["scopes"] if s["name"] == "Locals")
    variables = await client.request("variables",
                                     {"variablesReference": local["variablesReference"]})
    return {v["name"]: v["value"] for v in variables["variables"]}
