"""No breakpoint() hit is lost when a client leaves just as the next one happens.

A loop of 50 breakpoint()s; for each, a client attaches to the next pause, reads ``i``,
continues and detaches, as fast as it can. The hit that follows each continue races the
departing client: a pause that has not stopped under that client must wait for the next one.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from helpers import HubProcess, finish, run, write_script

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]

HITS = 50

LOOP = f"""
for i in range({HITS}):
    breakpoint()
    i  # the stop is here, the line after breakpoint()
print("done", flush=True)
"""


async def read_i_then_leave(hub: HubProcess, how: str) -> int:
    client = await hub.dap()
    stopped = await client.attach(timeout=30)
    frames = await client.request("stackTrace", {"threadId": stopped.body["threadId"]})
    value = await client.request("evaluate", {
        "expression": "i", "frameId": frames["stackFrames"][0]["id"], "context": "repl"})
    if how in ("continue+disconnect", "continue+close"):
        await client.request("continue", {"threadId": stopped.body["threadId"]})
    if how != "continue+close":
        await client.request("disconnect", {})
    await client.close()
    return int(value["result"])


@pytest.mark.parametrize("how", ["continue+disconnect", "disconnect", "continue+close"])
def test_every_hit_of_a_loop_is_seen_in_order(hub: HubProcess, tmp_path: Path, how: str):
    proc = hub.spawn(write_script(tmp_path, "loop.py", LOOP))

    seen: list[int] = []

    async def follow() -> None:
        for _ in range(HITS):
            seen.append(await read_i_then_leave(hub, how))

    try:
        run(follow(), timeout=240)
    except TimeoutError:
        pytest.fail(f"a hit was lost: saw {seen}")
    assert seen == list(range(HITS))
    code, out, err = finish(proc)
    assert code == 0 and "done" in out, err
