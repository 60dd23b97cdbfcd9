"""A TLS listener whose failed handshakes are logged.

``asyncio.start_server(ssl=...)`` drops a connection whose TLS handshake fails without a
word (asyncio logs it only in debug mode), so an agent that speaks plaintext, or a port scan,
would leave no trace. This listener accepts TCP connections itself, runs the handshake with
``loop.connect_accepted_socket`` (bounded by ``handshake_timeout``), logs a failure with the
peer's address, and hands a successful connection to ``handler`` as a stream pair. It offers
the parts of :class:`asyncio.Server` the hub uses.
"""

from __future__ import annotations

import asyncio
import logging
import socket
import ssl
from collections.abc import Awaitable, Callable
from typing import Any

log = logging.getLogger("raydebug.hub")

Handler = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]
STREAM_LIMIT = 2 ** 16  # asyncio's default


class TlsServer:
    def __init__(self, sock: socket.socket, context: ssl.SSLContext,
                 handshake_timeout: float, handler: Handler) -> None:
        self._sock = sock
        self._context = context
        self._timeout = handshake_timeout
        self._handler = handler
        self._tasks: set[asyncio.Task[Any]] = set()
        self._accepting: asyncio.Task[None] | None = None
        self.failed_handshakes = 0

    @classmethod
    async def start(cls, host: str, port: int, context: ssl.SSLContext,
                    handshake_timeout: float, handler: Handler) -> TlsServer:
        """Bind and start accepting; raises OSError when the address is taken."""
        infos = await asyncio.get_running_loop().getaddrinfo(
            host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
        family, kind, proto, _, address = infos[0]
        sock = socket.socket(family, kind, proto)
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind(address)
            sock.listen(socket.SOMAXCONN)
            sock.setblocking(False)
        except OSError:
            sock.close()
            raise
        server = cls(sock, context, handshake_timeout, handler)
        server._accepting = asyncio.ensure_future(server._accept_forever())
        return server

    @property
    def sockets(self) -> tuple[socket.socket, ...]:
        return (self._sock,)

    async def serve_forever(self) -> None:
        assert self._accepting is not None
        await asyncio.shield(self._accepting)

    def close(self) -> None:
        """Stop accepting and cancel every connection (handshaking or served)."""
        if self._accepting is not None:
            self._accepting.cancel()
        for task in self._tasks:
            task.cancel()
        self._sock.close()

    async def wait_closed(self) -> None:
        pending = [*self._tasks, *([self._accepting] if self._accepting else [])]
        await asyncio.gather(*pending, return_exceptions=True)

    async def _accept_forever(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            try:
                conn, address = await loop.sock_accept(self._sock)
            except OSError as error:  # EMFILE and the like: the next accept may work
                log.warning("agent listener: accept failed: %s", error)
                await asyncio.sleep(0.1)
                continue
            task = asyncio.ensure_future(self._serve(conn, address))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    async def _serve(self, conn: socket.socket, address: Any) -> None:
        loop = asyncio.get_running_loop()
        peer = "{}:{}".format(*address[:2]) if isinstance(address, tuple) else str(address)
        reader = asyncio.StreamReader(limit=STREAM_LIMIT)
        protocol = asyncio.StreamReaderProtocol(reader)
        try:
            transport, _ = await loop.connect_accepted_socket(
                lambda: protocol, conn, ssl=self._context, ssl_handshake_timeout=self._timeout)
        except asyncio.CancelledError:
            conn.close()
            raise
        except (OSError, TimeoutError) as error:
            self.failed_handshakes += 1
            conn.close()
            reason = getattr(error, "reason", None) or str(error) or type(error).__name__
            log.warning("agent %s: refused: no TLS handshake (%s). This listener requires "
                        "TLS: an agent needs the hub's certificate fingerprint "
                        "(RAYDEBUG_HUB_CERT, or found with the hub's address)", peer, reason)
            return
        writer = asyncio.StreamWriter(transport, protocol, reader, loop)
        await self._handler(reader, writer)
