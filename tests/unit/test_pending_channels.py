"""A channel's failure reaches the client that asked for it, before or after its socket."""

from __future__ import annotations

import asyncio

import pytest

from raydebug.errors import ChannelFailedError
from raydebug.hub.agents.listener import DataChannel, PendingChannels


def test_a_failure_before_the_connection_fails_the_wait_for_it():
    async def scenario() -> None:
        channels = PendingChannels()
        channel, connection = channels.expect()
        channels.fail(channel, "pydevd failed: no module")
        with pytest.raises(ChannelFailedError, match="no module"):
            await connection

    asyncio.run(scenario())


def test_a_failure_after_the_connection_is_kept_until_forgotten():
    async def scenario() -> None:
        channels = PendingChannels()
        channel, connection = channels.expect()
        delivered = DataChannel(None, None)  # type: ignore[arg-type]
        assert channels.deliver(channel, delivered)
        assert await connection is delivered
        waiting = asyncio.ensure_future(channels.wait_failure(channel, 5.0))
        await asyncio.sleep(0)
        channels.fail(channel, "pydevd failed: no module")
        assert await waiting == "pydevd failed: no module"
        assert await channels.wait_failure(channel, 0.01) == "pydevd failed: no module"
        channels.forget(channel)
        assert await channels.wait_failure(channel, 0.01) is None
        other, _ = channels.expect()
        assert await channels.wait_failure(other, 0.01) is None  # none given: a timeout

    asyncio.run(scenario())
