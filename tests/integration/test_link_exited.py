"""`raydebug link pid=N` of a process that exits right after its link, before the hub lists
it (as a Ray worker its raylet ends as idle at that moment): one line says it exited, and
the command succeeds, soon: the link is not a failure, and the wait ends when the process
does. Real hub, real ptrace; the target's raydebug is a stand-in whose link answers
``linked`` and ends the process 0.3 s later, before any registration."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from helpers import TIMEOUT, raydebug, read_line, start_hub, write_script

pytestmark = pytest.mark.integration

PLAIN = """
import threading
print("ready", flush=True)
threading.Event().wait()  # blocked in C: the link's way in
"""

LINKED_THEN_EXITS = """
import os, threading

def link(ticket):
    threading.Timer(0.3, os._exit, (0,)).start()
    return {"status": "linked"}
"""


def test_a_process_that_exits_after_its_link_is_said_to_have_exited(tmp_path: Path) -> None:
    stand_in = tmp_path / "stand_in" / "raydebug" / "linking"
    stand_in.mkdir(parents=True)
    (stand_in.parent / "__init__.py").write_text("")
    (stand_in / "__init__.py").write_text("")
    (stand_in / "inside.py").write_text(LINKED_THEN_EXITS)
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("RAYDEBUG") and k != "PYTHONBREAKPOINT"}
    with start_hub() as hub:
        target = subprocess.Popen(
            [sys.executable, str(write_script(tmp_path, "plain.py", PLAIN))],
            env={**env, "PYTHONPATH": str(stand_in.parent.parent)},
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        hub.workers.append(target)  # stopped with the hub
        assert read_line(target).strip() == "ready"
        started = time.monotonic()
        said = raydebug(hub, "link", "--timeout", "20", f"pid={target.pid}")
        assert said.returncode == 0, said
        assert said.stdout == (f"linked pid {target.pid}, then it exited before the hub "
                               "listed it\n"), said
        assert time.monotonic() - started < 10  # not the 20 s a listing could take
        assert target.wait(timeout=TIMEOUT) == 0
