"""A data connection's failure reaches the client that asked for it, before or after its
socket."""

from __future__ import annotations

import asyncio

import pytest

from raydebug.errors import ChannelFailedError
from raydebug.hub.agents.data_connections import DataConnection, PendingDataConnections


def test_a_failure_before_the_connection_fails_the_wait_for_it():
    async def scenario() -> None:
        pending = PendingDataConnections()
        connection_id, connection = pending.expect()
        pending.fail(connection_id, "pydevd failed: no module")
        with pytest.raises(ChannelFailedError, match="no module"):
            await connection

    asyncio.run(scenario())


def test_a_failure_after_the_connection_is_kept_until_forgotten():
    async def scenario() -> None:
        pending = PendingDataConnections()
        connection_id, connection = pending.expect()
        delivered = DataConnection(None, None)  # type: ignore[arg-type]
        assert pending.deliver(connection_id, delivered)
        assert await connection is delivered
        waiting = asyncio.ensure_future(pending.wait_failure(connection_id, 5.0))
        await asyncio.sleep(0)
        pending.fail(connection_id, "pydevd failed: no module")
        assert await waiting == "pydevd failed: no module"
        assert await pending.wait_failure(connection_id, 0.01) == "pydevd failed: no module"
        pending.forget(connection_id)
        assert await pending.wait_failure(connection_id, 0.01) is None
        other, _ = pending.expect()
        assert await pending.wait_failure(other, 0.01) is None  # none given: a timeout

    asyncio.run(scenario())
