"""The worker listener: authenticates agents, keeps their control connections, and hands
data connections to the DAP client that asked for them.

Every connection is answered with a fresh nonce; a worker proves it knows the token with an
HMAC over it (:mod:`raydebug.protocol.worker`), so the token never crosses the wire and a
recorded handshake cannot be replayed. A connection that does not answer within the
handshake timeout is closed (an established one may then stay idle: a paused process waits).
Failures are logged with the peer's address and the connection is closed; nothing else on
the hub is affected.
"""

from __future__ import annotations

import asyncio
import logging
import secrets
from dataclasses import dataclass, field

from ..errors import RaydebugError, RemoteProtocolError, SessionBusyError
from ..protocol.worker import (
    ROLE_CONTROL,
    ROLE_DATA,
    Challenge,
    ChannelFailed,
    ControlMessage,
    ControlStream,
    Hello,
    Refused,
    SessionEnded,
    SessionStarted,
    Welcome,
    encode_control,
    verify_mac,
)
from ..session import SessionRecord
from .net import peer_name, read_next, set_nodelay
from .registry import Process, Registry

log = logging.getLogger("raydebug.hub")


@dataclass
class DataChannel:
    """A worker's data connection, handed to the client that requested it."""

    reader: asyncio.StreamReader
    writer: asyncio.StreamWriter
    leftover: bytes
    done: asyncio.Event = field(default_factory=asyncio.Event)


class PendingChannels:
    """Channels a client asked a process to open, by channel id."""

    def __init__(self) -> None:
        self._futures: dict[int, asyncio.Future[DataChannel]] = {}

    def expect(self) -> tuple[int, asyncio.Future[DataChannel]]:
        channel = secrets.randbits(62)
        future: asyncio.Future[DataChannel] = asyncio.get_running_loop().create_future()
        self._futures[channel] = future
        return channel, future

    def forget(self, channel: int) -> None:
        self._futures.pop(channel, None)

    def deliver(self, channel: int, data: DataChannel) -> bool:
        future = self._futures.pop(channel, None)
        if future is None or future.done():
            return False
        future.set_result(data)
        return True

    def fail(self, channel: int, reason: str) -> None:
        future = self._futures.pop(channel, None)
        if future is not None and not future.done():
            future.set_exception(RemoteProtocolError(reason))


class WorkerListener:
    def __init__(self, token: str, registry: Registry, channels: PendingChannels,
                 handshake_timeout: float = 10.0) -> None:
        self._token = token
        self._registry = registry
        self._channels = channels
        self._handshake_timeout = handshake_timeout
        self.refused = 0

    async def refuse(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                     reason: str) -> None:
        """Answer a connection with ``Refused(reason)`` instead of a challenge; close it."""
        self.refused += 1
        log.warning("worker %s: refused: %s", peer_name(writer), reason)
        try:
            writer.write(encode_control(Refused(reason=reason)))
            await asyncio.wait_for(writer.drain(), self._handshake_timeout)
        except (OSError, TimeoutError):
            pass
        finally:
            writer.close()

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """Serve one worker connection; always closes it."""
        set_nodelay(writer)
        peer = peer_name(writer)
        stream = ControlStream()
        try:
            hello = await self._authenticate(reader, writer, stream, peer)
            if hello is None:
                return
            if hello.role == ROLE_CONTROL:
                await self._serve_control(reader, writer, stream, hello, peer)
            else:
                await self._serve_data(reader, writer, stream, hello, peer)
        except (RaydebugError, OSError, TimeoutError) as error:
            log.warning("worker %s: %s; connection closed", peer, error or type(error).__name__)
        except Exception:  # a bug of ours: close this connection, keep serving the others
            log.exception("worker %s: unexpected error; connection closed", peer)
        finally:
            writer.close()

    async def _authenticate(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                            stream: ControlStream, peer: str) -> Hello | None:
        nonce = secrets.token_hex(16)
        writer.write(encode_control(Challenge(nonce=nonce)))
        try:
            message = await asyncio.wait_for(_read_message(reader, stream),
                                             self._handshake_timeout)
        except TimeoutError:
            raise RemoteProtocolError(f"no answer to the challenge within "
                                      f"{self._handshake_timeout:g}s") from None
        if not isinstance(message, Hello) or message.role not in (ROLE_CONTROL, ROLE_DATA):
            raise RemoteProtocolError("expected a hello message")
        if not verify_mac(self._token, nonce, message.role, message.mac):
            self.refused += 1
            log.warning("worker %s: refused: wrong token", peer)
            writer.write(encode_control(Refused(
                reason="wrong token: set RAYDEBUG_TOKEN to the token `raydebug hub` printed")))
            await writer.drain()
            return None
        return message

    async def _serve_control(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                             stream: ControlStream, hello: Hello, peer: str) -> None:
        def send(message: ControlMessage) -> None:
            if not writer.is_closing():
                writer.write(encode_control(message))

        process = self._registry.add_process(hello.process, peer, send)
        writer.write(encode_control(Welcome()))
        log.info("worker %s: process %s (pid %s) connected", peer, process.id,
                 hello.process.get("pid"))
        try:
            while True:
                message = await _read_message(reader, stream)
                if message is None:
                    return
                await self._on_control(process, message)
        finally:
            await self._registry.remove_process(process)
            log.info("worker %s: process %s disconnected", peer, process.id)

    async def _on_control(self, process: Process, message: ControlMessage) -> None:
        if isinstance(message, SessionStarted):
            record = SessionRecord.from_dict(message.session)
            try:
                await self._registry.add_session(process, record)
            except SessionBusyError as error:  # the process's other sessions stay served
                log.warning("worker %s: session %s refused: %s", process.peer, record.id, error)
                process.send(Refused(reason=f"session {record.id}: {error}"))
        elif isinstance(message, SessionEnded):
            await self._registry.end_session(process, message.session_id, message.reason,
                                             message.returned)
        elif isinstance(message, ChannelFailed):
            self._channels.fail(message.channel, message.reason)
        else:
            raise RemoteProtocolError(f"unexpected {message.TYPE!r} on a control connection")

    async def _serve_data(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                          stream: ControlStream, hello: Hello, peer: str) -> None:
        channel = DataChannel(reader, writer, b"")
        writer.write(encode_control(Welcome()))
        channel.leftover = stream.take_buffered()
        if not self._channels.deliver(hello.channel, channel):
            raise RemoteProtocolError(f"unknown data channel {hello.channel}")
        await channel.done.wait()  # the client's proxy owns the streams until then


async def _read_message(reader: asyncio.StreamReader,
                        stream: ControlStream) -> ControlMessage | None:
    """Next message, or None at a clean end of stream."""
    return await read_next(reader, stream.receive_data, stream.next_event)
