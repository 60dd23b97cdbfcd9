"""A real ``raydebug hub`` waits for a paused process's answers by polling when told to
(``--busy-poll on``; ``auto`` does so while the node has an idle CPU), and never when told
not to; either way every request is answered, by the process it was for."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from helpers import PAUSING_WORKER, attach, finish, run, start_hub, top_frame, write_script

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]

BATCH = 20  # requests between two looks at the hub's statistics
BATCHES = 10  # an answer found by polling is one back within 2 ms: on a loaded machine,
#               not every one is


@pytest.mark.parametrize("busy_poll", ["on", "off"])
def test_answers_are_found_by_polling_only_when_asked(tmp_path: Path, busy_poll: str):
    with start_hub("--busy-poll", busy_poll) as hub:
        proc = hub.spawn(write_script(tmp_path, "worker.py", PAUSING_WORKER))
        [session] = hub.wait_sessions(1)

        async def found_by_polling() -> int:
            return int((await asyncio.to_thread(hub.get, "/api/health"))["found_by_polling"])

        async def ask() -> int:
            client, stopped = await attach(*hub.client, session["id"])
            try:
                frame = await top_frame(client, stopped["threadId"])
                for _ in range(BATCHES):
                    results = [(await client.request("evaluate", {
                        "expression": f"value + {n}", "frameId": frame["id"],
                        "context": "repl"}))["result"] for n in range(BATCH)]
                    assert results == [str(41 + n) for n in range(BATCH)]
                    if busy_poll == "on" and await found_by_polling():
                        break
                await client.request("continue", {"threadId": stopped["threadId"]})
                await client.request("disconnect", {})
            finally:
                await client.close()
            return await found_by_polling()

        polled = run(ask())
        code, out, err = finish(proc)
        assert code == 0 and "finished 42" in out, err
    assert polled > 0 if busy_poll == "on" else polled == 0
