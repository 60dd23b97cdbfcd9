"""A worker's pause notice, which Ray prints in the driver, does not clobber the prompt of
the driver's own pdb in the same terminal (pty, real Ray on loopback, `raydebug run`)."""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path
from typing import Any

import pexpect
import pytest

from devtools.terminal import end_spawned
from helpers import write_script
from ray_cluster import LOOPBACK

pytest.importorskip("ray")
pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]

JOB = """
import sys
import ray

ray.init(address=sys.argv[1])

@ray.remote(num_cpus=0)
def pause():
    breakpoint()
    return 1

x = 5
ref = pause.remote()  # pauses while the driver sits at its own prompt
breakpoint()
print("driver continues", flush=True)
"""


RAY_NODES = ({"num_cpus": 1},)  # the module's cluster (the ``cluster`` fixture)


def test_a_workers_pause_notice_is_printed_above_the_drivers_pdb_prompt(cluster: Any,
                                                                        tmp_path: Path):
    script = write_script(tmp_path, "job.py", JOB)
    env = {**os.environ, **LOOPBACK, "TERM": "xterm", "NO_COLOR": "1",
           "RAYDEBUG_WAIT_TIMEOUT": "30"}
    child = pexpect.spawn(sys.executable, ["-m", "raydebug", "run", "--", sys.executable,
                                           str(script), cluster.address],
                          env=env, encoding="utf-8", timeout=120, dimensions=(24, 160))
    try:
        child.expect_exact("(Pdb) ")
        child.send("p x")  # typed, not yet entered, as the worker's notice arrives
        # The notice starts on a line of its own: the prompt's line is cleared first (it
        # was: "(Pdb) p x(pause pid=...) raydebug: session ..." and no prompt after it).
        child.expect(r"raydebug: session \w+ paused at [^\r\n]*waiting for a debugger[^\r\n]*"
                     r"\r\n")
        line_start = child.before.rsplit("\n", 1)[-1]
        assert re.fullmatch(r".*\r\x1b\[K(\x1b\[\d+m)?\(pause pid=\d+\)(\x1b\[0m)? ",
                            line_start, re.DOTALL), repr(line_start)
        # The prompt is drawn again under it, with what was typed.
        child.expect_exact("(Pdb) p x", timeout=10)
        child.sendline("")  # typing goes on where it was: the command is still "p x"
        child.expect_exact("5")
        child.expect_exact("(Pdb) ")
        child.sendline("c")
        child.expect_exact("driver continues")
    finally:
        end_spawned(child)
