"""What a process's first ``breakpoint()`` imports before its session is listed: only what the
way there needs (docs/design.md#agent-import). The arm, the stacks, the state file and the DAP
modules come when something uses them; these tests fail if one of them creeps back onto that
way.

Each runs in a fresh interpreter (``sys.modules`` of this one has everything by now).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from typing import Any

# Modules (and packages: their submodules too) the way from breakpoint() to a listed
# session does not need. pydevd and debugpy come right after the session is posted, on the
# pausing thread; ssl only with a --tls hub.
NOT_ON_THE_WAY = (
    "raydebug.agent.armed", "raydebug.agent.stacks",  # the arm: every module of its package
    "raydebug.agent.local_pdb", "raydebug.agent.link.relay", "raydebug.state_file", "raydebug.tls",
    "raydebug.hub", "raydebug.integrations", "raydebug.client", "debugpy", "pydevd", "ray",
    "ssl", "ctypes", "platform", "sysconfig", "pathlib", "traceback", "encodings.idna",
    "raydebug.protocol.messages", "raydebug.protocol.connection",  # DAP's: the hub's, pydevd's
)

# The agent's way to a listed session, as raydebug.set_trace takes it, short of the hub: the
# package, the agent and what it makes, a session's record, and the link's first attempt (to
# a port that refuses it: the dial and its error path run).
FIRST_BREAKPOINT = """
import json, os, socket, sys
at_start = set(sys.modules)  # (what the interpreter's site imported is not ours)
closed = socket.socket()
closed.bind(("127.0.0.1", 0))  # bound, never listening: the connect is refused
os.environ["RAYDEBUG_HUB"] = "127.0.0.1:%d" % closed.getsockname()[1]
import raydebug
raydebug.set_trace  # PYTHONBREAKPOINT's lookup: imports the agent
from raydebug.agent import get_agent
from raydebug.agent.metadata import record_for_frame
agent = get_agent()
record = record_for_frame(sys._getframe())
"""
FIRST_ATTEMPT = """
assert not agent.link._connect_control()
assert "refused" in agent.link.last_error, agent.link.last_error
"""


def run_fresh(code: str, **env: str) -> Any:
    """Run ``code`` in a fresh interpreter (no raydebug variables but ``env``); return the
    JSON it prints last."""
    environ = {k: v for k, v in os.environ.items() if not k.startswith("RAYDEBUG_")}
    done = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True,
                          text=True, timeout=60, env={**environ, **env})
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.splitlines()[-1])


def imported(names: tuple[str, ...]) -> str:
    """Code printing which of ``names`` (or their submodules) were imported since
    ``at_start``."""
    return (f"names = {names!r}\n"
            "inside = tuple(name + '.' for name in names)\n"
            "print(json.dumps(sorted(m for m in set(sys.modules) - at_start\n"
            "                        if m in names or m.startswith(inside))))\n")


def test_a_first_breakpoint_imports_nothing_it_does_not_need_before_listing():
    found = run_fresh(FIRST_BREAKPOINT + FIRST_ATTEMPT + imported(NOT_ON_THE_WAY),
                      RAYDEBUG_TOKEN="token")
    assert found == [], f"the way to a first breakpoint's listing imports {found}"


def test_the_arm_is_imported_with_the_first_non_empty_set_only():
    code = FIRST_BREAKPOINT + """
agent.arm_breakpoints({"sources": [], "functions": [], "exceptions": []})  # the hub's disarm
empty = sorted(m for m in sys.modules if m.startswith("raydebug.agent.armed"))
agent.arm_breakpoints({"sources": [{"path": "/nowhere.py", "breakpoints": [{"line": 1}]}]})
armed = agent.breakpoints.files
agent.arm_breakpoints({})
print(json.dumps([empty, sorted(armed), agent.breakpoints.active(),
                  "raydebug.agent.armed.breakpoints" in sys.modules]))
"""
    empty, armed, active, imported_then = run_fresh(code, RAYDEBUG_TOKEN="token")
    assert empty == []
    assert armed == ["/nowhere.py"] and not active and imported_then


def test_a_live_link_connects_without_the_arm_the_stacks_or_the_dap_modules():
    """A live process's link thread imports, as it starts, only what its connection needs:
    the arm comes with the hub's first non-empty set, the stack reader with the first
    question (docs/design.md#live-link)."""
    code = FIRST_BREAKPOINT.split("agent = get_agent()")[0] + """
from raydebug import agent as package
from raydebug.agent import live
live.START_AT_LATEST = 0.0  # no wait for the start
package.start_live_link()
import time
deadline = time.monotonic() + 30
while package._agent is None or not package._agent.link.attempted.is_set():
    assert time.monotonic() < deadline, "the link made no attempt"
    time.sleep(0.01)
""" + imported(NOT_ON_THE_WAY)
    assert run_fresh(code, RAYDEBUG_TOKEN="token") == []
