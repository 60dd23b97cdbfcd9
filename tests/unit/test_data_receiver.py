"""The hub's receiving side of a data connection (hub/agents/data_receiver.py), over a real
loopback connection switched to it with set_protocol, as the agent listener does."""

from __future__ import annotations

import asyncio
import socket

import pytest

from raydebug.errors import PeerClosed, RemoteProtocolError
from raydebug.hub.agents.data_receiver import DataReceiver
from raydebug.protocol.framing import frame


async def connected(leftover: bytes = b"") -> tuple[socket.socket, asyncio.StreamWriter,
                                                    DataReceiver]:
    """(pydevd's end, the hub's writer, its receiver). The writer must be kept: it closes
    its transport when collected."""
    listener = socket.create_server(("127.0.0.1", 0))
    with listener:
        _, writer = await asyncio.open_connection(*listener.getsockname())
        pydevd, _ = listener.accept()
    transport = writer.transport
    assert isinstance(transport, asyncio.Transport)
    receiver = DataReceiver(transport, leftover)
    transport.set_protocol(receiver)
    return pydevd, writer, receiver


def test_bodies_come_in_order_the_leftover_first_then_the_end():
    async def scenario() -> None:
        pydevd, writer, receiver = await connected(leftover=frame(b'{"n":0}')[:5])
        with pydevd:
            pydevd.sendall(frame(b'{"n":0}')[5:] + frame(b'{"n":1}'))
            assert await asyncio.wait_for(receiver.next_body(), 5) == b'{"n":0}'
            assert await asyncio.wait_for(receiver.next_body(), 5) == b'{"n":1}'
            pydevd.shutdown(socket.SHUT_WR)
            with pytest.raises(PeerClosed):
                await asyncio.wait_for(receiver.next_body(), 5)
        writer.close()

    asyncio.run(scenario())


def test_the_relay_takes_each_body_in_the_callback_and_pauses_for_a_slow_taker():
    async def scenario() -> None:
        pydevd, writer, receiver = await connected()
        transport = writer.transport
        taken: list[bytes] = []
        got = asyncio.Event()
        backed_up = True
        resumed = asyncio.Event()

        def take(body: bytes) -> None:
            taken.append(body)
            got.set()

        relay = asyncio.ensure_future(receiver.relay(take, lambda: backed_up, resumed.wait))
        with pydevd:
            pydevd.sendall(frame(b'{"n":1}'))
            await asyncio.wait_for(got.wait(), 5)
            assert not transport.is_reading()  # the taker is backed up: pydevd waits
            got.clear()
            backed_up = False
            resumed.set()
            pydevd.sendall(frame(b'{"n":2}'))
            await asyncio.wait_for(got.wait(), 5)
            assert taken == [b'{"n":1}', b'{"n":2}'] and transport.is_reading()
            pydevd.shutdown(socket.SHUT_WR)
            await asyncio.wait_for(relay, 5)  # the connection's end ends the relay
        writer.close()

    asyncio.run(scenario())


def test_a_malformed_message_ends_the_relay_with_its_error():
    async def scenario() -> None:
        pydevd, writer, receiver = await connected()
        with pydevd:
            pydevd.sendall(b"Content-Length: nope\r\n\r\n{}")
            with pytest.raises(RemoteProtocolError):
                await asyncio.wait_for(receiver.relay(lambda body: None, lambda: False,
                                                      asyncio.sleep), 5)
        writer.close()

    asyncio.run(scenario())
