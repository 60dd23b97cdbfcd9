"""The sans-IO framer: whole bodies out, bounds enforced before allocation."""

from __future__ import annotations

import subprocess
import sys

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from raydebug.errors import LocalProtocolError, RemoteProtocolError
from raydebug.protocol import NEED_DATA, Framer, frame


def bodies(framer: Framer) -> list[bytes]:
    out = []
    while (body := framer.next_body()) is not NEED_DATA:
        assert isinstance(body, bytes)
        out.append(body)
    return out


def test_bodies_arrive_whole_whatever_the_chunking():
    data = frame(b'{"a":1}') + frame(b"") + frame("é".encode() * 100)
    for size in (1, 2, 7, len(data)):
        framer = Framer()
        received = []
        for start in range(0, len(data), size):
            framer.receive_data(data[start:start + size])
            received += bodies(framer)
        assert received == [b'{"a":1}', b"", "é".encode() * 100]


def test_header_names_are_case_insensitive_and_other_headers_ignored():
    framer = Framer()
    framer.receive_data(b"content-length: 2\r\nContent-Type: application/json\r\n\r\n{}")
    assert bodies(framer) == [b"{}"]


def test_a_huge_announced_body_is_refused_before_it_arrives():
    framer = Framer(max_body_size=1024)
    framer.receive_data(b"Content-Length: 2000000000\r\n\r\n")
    with pytest.raises(RemoteProtocolError, match="2000000000 bytes announced"):
        framer.next_body()
    assert framer.buffered < 100  # nothing was allocated for it


@pytest.mark.parametrize("header, error", [
    (b"Content-Type: x\r\n\r\n", "no Content-Length"),
    (b"Content-Length: -5\r\n\r\n", "invalid Content-Length"),
    (b"Content-Length: 1e9\r\n\r\n", "invalid Content-Length"),
    (b"garbage line\r\n\r\n", "malformed header line"),
    (b"\x00\x01\x02", "non-text bytes"),
    (b"Content-Length: 1" + b"1" * 5000, "longer than"),
])
def test_malformed_headers_are_remote_errors(header: bytes, error: str):
    framer = Framer()
    framer.receive_data(header)
    with pytest.raises(RemoteProtocolError, match=error):
        framer.next_body()
    with pytest.raises(RemoteProtocolError):  # and the stream stays broken
        framer.next_body()


def test_end_of_stream_inside_a_message_is_an_error_but_between_messages_is_not():
    framer = Framer()
    framer.receive_data(frame(b"{}"))
    framer.receive_data(b"")
    assert bodies(framer) == [b"{}"]
    cut = Framer()
    cut.receive_data(b"Content-Length: 10\r\n\r\n{")
    cut.receive_data(b"")
    with pytest.raises(RemoteProtocolError, match="closed in the middle"):
        cut.next_body()


def test_sending_more_than_the_limit_is_a_local_error():
    with pytest.raises(LocalProtocolError):
        frame(b"x" * 11, max_body_size=10)


@settings(max_examples=3000, deadline=None)
@given(st.binary(max_size=300), st.integers(min_value=1, max_value=64))
def test_fuzz_random_bytes_never_crash_the_framer(data: bytes, chunk: int):
    framer = Framer(max_body_size=4096)
    try:
        for start in range(0, len(data), chunk):
            framer.receive_data(data[start:start + chunk])
            bodies(framer)
        framer.receive_data(b"")
        bodies(framer)
    except RemoteProtocolError:
        pass  # the only way a framer may refuse input


def test_protocol_imports_no_io_and_no_threads():
    code = ("import sys, raydebug.protocol, raydebug.protocol.control; "
            "import raydebug.protocol.handshake, raydebug.protocol.proxy_policy; "
            "import raydebug.protocol.paths, raydebug.protocol.outstanding; "
            "print(sorted(m for m in ('socket', 'asyncio', 'ray', 'selectors', 'debugpy', "
            "'threading') if m in sys.modules))")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            check=True, timeout=60)
    assert result.stdout.strip() == "[]"
