"""The control connection's reader: messages handled as their bytes arrive, in order, a
message that must be awaited holding back those after it, reading paused while many wait."""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Callable, Coroutine
from typing import Any

import pytest

from raydebug.errors import RemoteProtocolError
from raydebug.hub.agents import control_reader
from raydebug.hub.agents.control_reader import ControlReader
from raydebug.protocol.control import (
    ControlConnection,
    ControlMessage,
    Paused,
    SessionEnded,
    Stacks,
    encode_control,
)


class Transport(asyncio.Transport):
    """What the reader asks of its transport, recorded."""

    def __init__(self) -> None:
        super().__init__()
        self.closing = False
        self.paused = False
        self.reader: ControlReader | None = None

    def is_closing(self) -> bool:
        return self.closing

    def close(self) -> None:
        if not self.closing:
            self.closing = True
            assert self.reader is not None
            asyncio.get_running_loop().call_soon(self.reader.connection_lost, None)

    def pause_reading(self) -> None:
        self.paused = True

    def resume_reading(self) -> None:
        self.paused = False


def in_loop(test: Callable[..., Coroutine[Any, Any, None]]) -> Callable[..., None]:
    """Run the async ``test`` in a fresh event loop (fixtures pass through)."""
    @functools.wraps(test)
    def run(*args: Any, **kwargs: Any) -> None:
        asyncio.run(test(*args, **kwargs))
    return run


def make_reader(handler: Any) -> tuple[ControlReader, Transport]:
    transport = Transport()
    reader = ControlReader(transport, ControlConnection(), handler, "peer")
    transport.reader = reader
    return reader, transport


def answer(request_id: int) -> bytes:
    return encode_control(Stacks(request_id=request_id))


@in_loop
async def test_answers_are_handled_in_the_callback_that_received_them() -> None:
    seen: list[ControlMessage] = []
    reader, _ = make_reader(lambda message: seen.append(message))
    data = answer(1) + answer(2) + answer(3)
    reader.data_received(data[:10])
    assert seen == []
    reader.data_received(data[10:])
    assert [m.request_id for m in seen if isinstance(m, Stacks)] == [1, 2, 3]


@in_loop
async def test_a_message_that_must_be_awaited_holds_back_those_after_it() -> None:
    seen: list[str] = []
    release = asyncio.Event()

    async def slow(message: ControlMessage) -> None:
        await release.wait()
        seen.append(f"done {message.TYPE}")

    def handler(message: ControlMessage) -> Any:
        seen.append(message.TYPE)
        return slow(message) if isinstance(message, SessionEnded) else None

    reader, _ = make_reader(handler)
    reader.data_received(encode_control(SessionEnded(session_id="s1")) + answer(1)
                         + encode_control(Paused(request_id=2)))
    await asyncio.sleep(0)
    assert seen == ["session_ended"]  # the answer waits behind the session's end
    assert len(reader.backlog) == 2
    reader.data_received(answer(3))
    release.set()
    for _ in range(5):
        await asyncio.sleep(0)
    assert seen == ["session_ended", "done session_ended", "stacks", "paused", "stacks"]
    reader.data_received(answer(4))  # nothing waits now: handled at once
    assert seen[-1] == "stacks" and not reader.backlog


@in_loop
async def test_reading_pauses_while_many_messages_wait(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(control_reader, "PAUSE_READING_AT", 4)
    release = asyncio.Event()

    def handler(message: ControlMessage) -> Any:
        return release.wait() if isinstance(message, SessionEnded) else None

    reader, transport = make_reader(handler)
    reader.data_received(encode_control(SessionEnded(session_id="s1")))
    reader.data_received(b"".join(answer(i) for i in range(6)))
    assert transport.paused
    release.set()
    for _ in range(3):
        await asyncio.sleep(0)
    assert not transport.paused and not reader.backlog


@in_loop
async def test_a_malformed_message_closes_the_connection(caplog: pytest.LogCaptureFixture
                                                         ) -> None:
    seen: list[ControlMessage] = []
    reader, transport = make_reader(lambda message: seen.append(message))
    reader.data_received(answer(1) + b"Content-Length: 2\r\n\r\n{]" + answer(2))
    assert transport.closing and [m.TYPE for m in seen] == ["stacks"]
    assert "not valid JSON" in caplog.text
    await asyncio.wait_for(reader.finished(), 1)


@in_loop
async def test_a_message_the_handler_refuses_closes_the_connection() -> None:
    def handler(message: ControlMessage) -> None:
        raise RemoteProtocolError(f"unexpected {message.TYPE!r}")

    reader, transport = make_reader(handler)
    reader.data_received(answer(1) + answer(2))
    assert transport.closing
    await asyncio.wait_for(reader.finished(), 1)


@in_loop
async def test_a_message_cut_short_by_the_end_of_the_stream_is_an_error(
        caplog: pytest.LogCaptureFixture) -> None:
    reader, transport = make_reader(lambda message: None)
    reader.data_received(answer(1)[:-3])
    reader.eof_received()
    assert transport.closing and "in the middle of a message" in caplog.text


@in_loop
async def test_finished_waits_for_the_message_being_handled() -> None:
    """The owner forgets the process only after, so a session being added when the
    connection closed is not left behind."""
    release = asyncio.Event()
    done: list[str] = []

    async def slow() -> None:
        await release.wait()
        done.append("added")

    reader, transport = make_reader(
        lambda message: slow() if isinstance(message, SessionEnded) else None)
    reader.data_received(encode_control(SessionEnded(session_id="s1")) + answer(1))
    transport.close()
    finished = asyncio.ensure_future(reader.finished())
    await asyncio.sleep(0.01)
    assert not finished.done()
    release.set()
    await asyncio.wait_for(finished, 1)
    assert done == ["added"] and not reader.backlog  # the answer after it was dropped
