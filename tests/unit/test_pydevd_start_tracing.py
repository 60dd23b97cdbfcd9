"""pydevd's start traces no thread but the one that starts it (3.10/3.11), and leaves the
process untraced; the next arm traces every thread.

pydevd's own start would trace every thread, each through a helper thread it waits for, on a
first pause's way to its client (docs/design.md#first-pause), and the tracing keeper would
take it out again at once. Run in a subprocess: starting pydevd installs tracing, which must
not reach this test process.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
TIMEOUT = 60

pytestmark = pytest.mark.skipif(sys.version_info >= (3, 12),
                                reason="3.12+: pydevd starts sys.monitoring, no helper threads")

PROBE = """
import json, sys, threading, time

seen = []  # what the other thread found as its own trace function, as it ran
stop = threading.Event()
running = threading.Event()

def other():
    while not stop.is_set():
        seen.append(sys.gettrace() is not None)
        running.set()
        time.sleep(0.0005)

thread = threading.Thread(target=other, daemon=True)
thread.start()
running.wait(10)
from raydebug.agent.debugger.facade import Debugger

debugger = Debugger(lambda *a: None, lambda *a: None)
debugger.ensure_started()
start_result = {
    "traced_after_start": debugger.is_traced(),
    "this_thread_traced": sys.gettrace() is not None,
}
time.sleep(0.1)  # the other thread runs on
during = len(seen)
start_result["other_traced_since_start"] = any(seen)
debugger._tracing.before_request(json.dumps({"command": "setBreakpoints"}))  # arms
time.sleep(0.1)
start_result["other_traced_after_arm"] = any(seen[during:])
stop.set()
print(json.dumps(start_result))
"""


def test_pydevd_start_traces_only_the_starting_thread_and_the_arm_traces_all() -> None:
    done = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True,
                          timeout=TIMEOUT, env={**os.environ, "PYTHONPATH": str(ROOT / "src")})
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["other_traced_since_start"] is False, result  # never, not even a moment
    assert result["traced_after_start"] is False, result
    assert result["this_thread_traced"] is False, result
    assert result["other_traced_after_arm"] is True, result
