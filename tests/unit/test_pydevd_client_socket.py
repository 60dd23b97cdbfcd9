"""The socket pydevd writes to: one write per DAP message (agent/debugger/clients.py)."""

from __future__ import annotations

import select
import socket

from raydebug.agent.debugger.clients import OneWritePerMessage


def test_a_header_waits_for_its_body_and_both_leave_in_one_write():
    ours, theirs = socket.socketpair()
    with ours, theirs:
        sock = OneWritePerMessage(theirs.family, theirs.type, theirs.proto,
                                  fileno=theirs.detach())
        with sock:
            body = b'{"seq": 1, "type": "event", "event": "initialized"}'
            sock.sendall(f"Content-Length: {len(body)}\r\n\r\n".encode())  # as pydevd does
            assert select.select([ours], [], [], 0)[0] == []  # nothing sent yet
            sock.sendall(body)
            assert ours.recv(4096) == f"Content-Length: {len(body)}\r\n\r\n".encode() + body
            sock.sendall(b"anything else goes at once")
            assert ours.recv(4096) == b"anything else goes at once"
