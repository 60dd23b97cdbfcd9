"""Post-mortem: an uncaught exception freezes the process where it was raised."""

from __future__ import annotations

from pathlib import Path

import pytest

from helpers import HubProcess, finish, line_of, run, write_script

pytestmark = pytest.mark.integration

FAILING = """
def parse(text):
    value = int(text) * 2
    raise ValueError(f"bad value {value}")  # raised here

def main():
    parse("21")

main()
"""

EXPLICIT = """
import raydebug

def risky(items):
    return items[5]  # raised here

try:
    risky([1, 2, 3])
except IndexError:
    raydebug.post_mortem()
print("handled and continued", flush=True)
"""


async def check_frozen_in_raising_frame(hub: HubProcess, session: dict, script: Path,
                                        local: str, value: str) -> None:
    client = await hub.dap()
    stopped = await client.attach(session["id"])
    assert stopped.body["reason"] == "exception"
    thread_id = stopped.body["threadId"]
    info = await client.request("exceptionInfo", {"threadId": thread_id})
    assert info["exceptionId"].startswith(session["exception"].split(":")[0])
    frames = (await client.request("stackTrace", {"threadId": thread_id}))["stackFrames"]
    assert Path(frames[0]["source"]["path"]).resolve() == script.resolve()
    assert frames[0]["line"] == line_of(script, "raised here")
    result = await client.request(
        "evaluate", {"expression": local, "frameId": frames[0]["id"], "context": "repl"})
    assert result["result"] == value
    await client.request("continue", {"threadId": thread_id})
    await client.request("disconnect", {})
    await client.close()


def test_uncaught_exception_freezes_with_RAYDEBUG_POST_MORTEM(hub: HubProcess, tmp_path: Path):
    script = write_script(tmp_path, "failing.py", FAILING)
    proc = hub.spawn(script, RAYDEBUG_POST_MORTEM="1", PYTHONBREAKPOINT="0")
    [session] = hub.wait_sessions(1)
    assert session["reason"] == "exception"
    assert session["exception"] == "ValueError: bad value 42"
    assert session["function"] == "parse"
    assert session["line"] == line_of(script, "raised here")

    run(check_frozen_in_raising_frame(hub, session, script, "value", "42"))
    code, _out, err = finish(proc)
    assert code == 1  # the exception still ends the program as Python would
    assert "ValueError: bad value 42" in err


def test_post_mortem_call_in_an_except_block(hub: HubProcess, tmp_path: Path):
    script = write_script(tmp_path, "explicit.py", EXPLICIT)
    proc = hub.spawn(script)
    [session] = hub.wait_sessions(1)
    assert session["exception"] == "IndexError: list index out of range"
    run(check_frozen_in_raising_frame(hub, session, script, "len(items)", "3"))
    code, out, _err = finish(proc)
    assert code == 0 and "handled and continued" in out
