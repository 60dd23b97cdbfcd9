"""The agent listener's control connections, over real loopback sockets: each message goes to
its owner through the dispatch table, one with no place there is the agent's error, a bug of
ours is logged with the message it met; either closes that connection only. The cluster's
breakpoints are a scripted keeper (the listener sees them through a Protocol)."""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import AsyncIterator, Callable, Coroutine
from contextlib import asynccontextmanager
from typing import Any

import pytest

from raydebug.errors import ChannelFailedError
from raydebug.hub.agents.data_connections import PendingDataConnections
from raydebug.hub.agents.listener import AgentListener
from raydebug.hub.net import read_next
from raydebug.hub.registry import Registry
from raydebug.protocol.control import (
    ROLE_CONTROL,
    ArmBreakpoints,
    BreakpointsLoaded,
    ControlConnection,
    ControlMessage,
    DataConnectionFailed,
    Identify,
    LogpointOutput,
    Pause,
    PausePending,
    Register,
    encode_control,
)
from raydebug.protocol.handshake import AgentHandshake

TOKEN = "listener-token"
WAIT = 10.0  # seconds, for anything the hub does in answer to a message


def in_loop(test: Callable[..., Coroutine[Any, Any, None]]) -> Callable[..., None]:
    """Run the async ``test`` in a fresh event loop (fixtures pass through)."""
    @functools.wraps(test)
    def run(*args: Any, **kwargs: Any) -> None:
        asyncio.run(test(*args, **kwargs))
    return run


class Keeper:
    """A scripted keeper of the cluster's breakpoints: records what it is told, sets
    ``told`` each time; ``broken``: ``loaded`` raises (a bug of ours)."""

    def __init__(self, broken: bool = False) -> None:
        self.broken = broken
        self.loaded_paths: list[list[str]] = []
        self.logpoints: list[tuple[dict[str, Any], LogpointOutput]] = []
        self.told = asyncio.Event()

    def arm_message(self) -> ArmBreakpoints:
        return ArmBreakpoints(breakpoints={"sources": [{"path": "/job.py"}]})

    def loaded(self, paths: list[str]) -> None:
        if self.broken:
            raise ValueError("a bug of ours")
        self.loaded_paths.append(paths)
        self.told.set()

    def logpoint(self, process: dict[str, Any], output: LogpointOutput) -> None:
        self.logpoints.append((process, output))
        self.told.set()


class Agent:
    """The agent's end of one control connection, after its handshake."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                 stream: ControlConnection) -> None:
        self.reader, self.writer, self.stream = reader, writer, stream

    def send(self, *messages: ControlMessage) -> None:
        self.writer.write(b"".join(encode_control(message) for message in messages))

    async def next_message(self) -> ControlMessage | None:
        """The hub's next message; None once it closed the connection."""
        return await asyncio.wait_for(
            read_next(self.reader, self.stream.receive_data, self.stream.next_event), WAIT)


@asynccontextmanager
async def listening(keeper: Keeper) -> AsyncIterator[tuple[AgentListener, Registry,
                                                           PendingDataConnections, int]]:
    registry, pending = Registry(), PendingDataConnections()
    listener = AgentListener(TOKEN, registry, pending, keeper)
    server = await asyncio.start_server(listener.handle, "127.0.0.1", 0)
    try:
        yield listener, registry, pending, server.sockets[0].getsockname()[1]
    finally:
        server.close()
        await server.wait_closed()


async def connect(port: int, pid: int) -> Agent:
    """A control connection, authenticated and identified as ``pid``; the hub's first
    message (the cluster's breakpoints) is checked."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    handshake = AgentHandshake(TOKEN, ROLE_CONTROL)
    await read_next(reader, handshake.receive_data, handshake.next_event)  # the challenge
    writer.write(handshake.send())
    await read_next(reader, handshake.receive_data, handshake.next_event)  # the welcome
    stream = ControlConnection()
    if leftover := handshake.take_buffered():
        stream.receive_data(leftover)
    agent = Agent(reader, writer, stream)
    agent.send(Identify(process={"host": "node-1", "pid": pid}))
    first = await agent.next_message()
    assert first == ArmBreakpoints(breakpoints={"sources": [{"path": "/job.py"}]})
    return agent


@in_loop
async def test_each_control_message_reaches_its_owner() -> None:
    keeper = Keeper()
    async with listening(keeper) as (_, registry, pending, port):
        connection_id, delivered = pending.expect()
        agent = await connect(port, pid=41)
        agent.send(Register(process={"host": "node-1", "pid": 41, "worker_id": "w1"}),
                   PausePending(threads=2, since_ms=1500),
                   DataConnectionFailed(channel=connection_id, reason="pydevd failed: no module"),
                   BreakpointsLoaded(paths=["/job.py"]),
                   LogpointOutput(text="x=1", path="/job.py", line=4, task="train"))
        # In order: the logpoint, last, is handled after all the others.
        await asyncio.wait_for(keeper.told.wait(), WAIT)
        while not keeper.logpoints:
            keeper.told.clear()
            await asyncio.wait_for(keeper.told.wait(), WAIT)
        [process] = registry.all_processes()
        assert process.live and process.record.worker_id == "w1"
        assert process.pause_requested == {"threads": 2, "since": 1.5}
        with pytest.raises(ChannelFailedError, match="no module"):
            await delivered
        assert keeper.loaded_paths == [["/job.py"]]
        [(view, output)] = keeper.logpoints
        assert (view["pid"], view["task_name"], output.text) == (41, "train", "x=1")
        agent.writer.close()


@in_loop
async def test_a_message_with_no_place_closes_that_connection_only(
        caplog: pytest.LogCaptureFixture) -> None:
    keeper = Keeper()
    async with listening(keeper) as (_, _registry, _pending, port):
        with caplog.at_level(logging.WARNING, logger="raydebug.hub"):
            other = await connect(port, pid=42)
            agent = await connect(port, pid=43)
            agent.send(Pause(request_id=1))  # the hub's question, not the agent's to send
            assert await agent.next_message() is None  # closed
        assert "unexpected 'pause' on a control connection; connection closed" in caplog.text
        other.send(BreakpointsLoaded(paths=["/job.py"]))  # the other is served on
        await asyncio.wait_for(keeper.told.wait(), WAIT)
        assert keeper.loaded_paths == [["/job.py"]]
        other.writer.close()


@in_loop
async def test_a_bug_of_ours_closes_the_connection_saying_which_message_met_it(
        caplog: pytest.LogCaptureFixture) -> None:
    async with listening(Keeper(broken=True)) as (_, _registry, _pending, port):
        with caplog.at_level(logging.WARNING, logger="raydebug.hub"):
            agent = await connect(port, pid=44)
            agent.send(BreakpointsLoaded(paths=["/job.py"]))
            assert await agent.next_message() is None  # closed
        [record] = [r for r in caplog.records if r.exc_info]
        assert "unexpected error handling 'breakpoints_loaded'" in record.getMessage()
        assert "a bug of ours" in caplog.text  # with its traceback
