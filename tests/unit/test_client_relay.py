"""The hub's reading of a relayed DAP client (ClientStream.relay over the hub's ClientReader),
over a real loopback connection accepted as the hub's client listener accepts one."""

from __future__ import annotations

import asyncio
import json
import socket

import pytest

from raydebug.errors import RemoteProtocolError
from raydebug.hub.clients.stream import ClientStream
from raydebug.hub.net import CLIENT_RECV_SIZE, ClientReader, client_streams
from raydebug.protocol import Message, Request
from raydebug.protocol.framing import frame


def request(seq: int) -> bytes:
    return frame(json.dumps({"seq": seq, "type": "request", "command": "threads",
                             "arguments": {}}).encode())


async def accepted(first: bytes = request(0)) -> tuple[socket.socket, ClientStream,
                                                      asyncio.StreamWriter]:
    """(the client's end, the hub's stream of it, its writer), through client_streams; the
    client sent ``first``, which the hub read first (as it sniffs a client's protocol)."""
    streams: asyncio.Future[tuple[asyncio.StreamReader, asyncio.StreamWriter]] = \
        asyncio.get_running_loop().create_future()
    served = asyncio.Event()

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        streams.set_result((reader, writer))
        await served.wait()  # the connection stays the test's

    server = await asyncio.get_running_loop().create_server(
        client_streams(handler), "127.0.0.1", 0)
    client = socket.create_connection(server.sockets[0].getsockname()[:2])
    client.sendall(first)
    reader, writer = await asyncio.wait_for(streams, 5)
    server.close()
    served.set()
    read = await asyncio.wait_for(reader.readexactly(len(first)), 5)
    return client, ClientStream(reader, writer, read), writer


def test_messages_come_in_order_each_later_one_in_the_callback_then_the_end():
    async def scenario() -> None:
        client, stream, writer = await accepted()
        taken: list[tuple[int, bool]] = []  # (seq, taken inside a task)
        got = asyncio.Event()

        def take(message: Message) -> None:
            assert isinstance(message, Request)
            taken.append((message.seq, asyncio.current_task() is not None))
            got.set()

        with client:
            client.sendall(request(1) + request(2) + request(3)[:10])
            for seq in (0, 1):  # 0: the first bytes; 1 read with 2 and part of 3
                message = await asyncio.wait_for(stream.next_client_message(), 5)
                assert isinstance(message, Request) and message.seq == seq
            relay = asyncio.ensure_future(stream.relay(take, lambda: False, asyncio.sleep))
            await asyncio.wait_for(got.wait(), 5)
            got.clear()
            client.sendall(request(3)[10:])
            await asyncio.wait_for(got.wait(), 5)
            client.shutdown(socket.SHUT_WR)
            await asyncio.wait_for(relay, 5)  # the client's end ends the relay
        # The one read already (seq 2) is taken in the relay's task; seq 3 as its bytes came.
        assert taken == [(2, True), (3, False)]
        writer.close()

    asyncio.run(scenario())


def test_a_backed_up_taker_pauses_the_client_until_it_has_taken():
    async def scenario() -> None:
        client, stream, writer = await accepted(request(1))
        transport = writer.transport
        assert isinstance(transport, asyncio.ReadTransport)
        taken: list[int] = []
        got = asyncio.Event()
        backed_up = True
        drained = asyncio.Event()

        def take(message: Message) -> None:
            taken.append(message.seq)
            got.set()

        relay = asyncio.ensure_future(stream.relay(take, lambda: backed_up, drained.wait))
        with client:
            await asyncio.wait_for(got.wait(), 5)
            assert not transport.is_reading()  # pydevd's side is behind: the client waits
            got.clear()
            backed_up = False
            drained.set()
            client.sendall(request(2))
            await asyncio.wait_for(got.wait(), 5)
            assert taken == [1, 2] and transport.is_reading()
            client.shutdown(socket.SHUT_WR)
            await asyncio.wait_for(relay, 5)
        writer.close()

    asyncio.run(scenario())


def test_a_malformed_message_ends_the_relay_with_its_error():
    async def scenario() -> None:
        client, stream, writer = await accepted(b"Content-Length: nope\r\n\r\n{}")
        with client, pytest.raises(RemoteProtocolError):
            await asyncio.wait_for(stream.relay(lambda message: None, lambda: False,
                                                asyncio.sleep), 5)
        writer.close()

    asyncio.run(scenario())


def test_a_cancelled_relay_leaves_the_bytes_it_did_not_take_to_be_read():
    async def scenario() -> None:
        client, stream, writer = await accepted(request(6)[:10])
        with client:
            relay = asyncio.ensure_future(stream.relay(lambda message: None, lambda: False,
                                                       asyncio.sleep))
            await asyncio.sleep(0)  # diverted
            relay.cancel()
            await asyncio.gather(relay, return_exceptions=True)
            client.sendall(request(6)[10:] + request(7))
            for seq in (6, 7):
                message = await asyncio.wait_for(stream.next_client_message(), 5)
                assert isinstance(message, Request) and message.seq == seq
        writer.close()

    asyncio.run(scenario())


def test_a_client_connection_receives_at_most_64_kib_at_a_time():
    # asyncio's 256 KiB receive is an mmap, an mremap and a munmap each (docs/design.md
    # #per-step-costs); the hub's client connections receive less at a time.
    async def scenario() -> None:
        client, stream, writer = await accepted()
        reader = stream._reader
        assert isinstance(reader, ClientReader)
        chunks: list[int] = []
        ended = asyncio.Event()

        def receive(data: bytes) -> None:
            chunks.append(len(data))
            if not data:
                ended.set()

        reader.divert(receive)
        with client:
            client.sendall(b"x" * (600 * 1024))
            client.shutdown(socket.SHUT_WR)
            await asyncio.wait_for(ended.wait(), 5)
        assert sum(chunks) == 600 * 1024 and max(chunks) <= CLIENT_RECV_SIZE, chunks
        writer.close()

    asyncio.run(scenario())
