"""The DAP client's waits are cancel-safe: a waiter cancelled at any moment never takes an
event or a reverse request with it (a cluster IDE that stopped waiting for
``startDebugging`` to open a child lost the next offer: "68 of 70 children stopped")."""

from __future__ import annotations

import asyncio
import contextlib
import socket

import pytest

from raydebug.client.dap import DapClient
from raydebug.protocol import DapConnection, Request


async def _offers_survive_a_cancelled_wait() -> list[int]:
    ours, theirs = socket.socketpair()
    reader, writer = await asyncio.open_connection(sock=ours)
    client = DapClient(reader, writer)
    adapter = DapConnection()  # frames what the "hub" sends
    got = []
    try:
        for turns in range(12):  # cancel the waiter 0, 1, 2... loop turns after the arrival
            waiting = asyncio.ensure_future(client.wait_reverse_request("startDebugging", 5))
            await asyncio.sleep(0)
            theirs.sendall(adapter.send(Request(seq=turns + 1, command="startDebugging",
                                                arguments={"n": turns})))
            for _ in range(turns):
                await asyncio.sleep(0)
            if waiting.done():
                got.append(waiting.result().arguments["n"])
                continue
            # Not done yet: a cancel means "I no longer want it" (as an IDE that turns to
            # another task does), and the offer waits for the next waiter.
            waiting.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await waiting
            again = await client.wait_reverse_request("startDebugging", 2)
            got.append(again.arguments["n"])
    finally:
        await client.close()
        theirs.close()
    return got


def test_a_cancelled_wait_leaves_the_offer_to_the_next():
    assert asyncio.run(_offers_survive_a_cancelled_wait()) == list(range(12))


def test_a_wait_still_times_out():
    async def scenario() -> None:
        ours, theirs = socket.socketpair()
        client = DapClient(*await asyncio.open_connection(sock=ours))
        try:
            with pytest.raises(TimeoutError):
                await client.wait_event("stopped", timeout=0.05)
        finally:
            await client.close()
            theirs.close()

    asyncio.run(scenario())
