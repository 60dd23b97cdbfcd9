"""`make demo` on a terminal, as a person runs it: Ctrl-C belongs to the debugger."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pexpect
import pytest

from devtools.terminal import end_spawned

pytest.importorskip("ray")
pytestmark = [pytest.mark.integration, pytest.mark.timeout(400)]

DEMO = Path(__file__).parents[2] / "examples" / "ray_demo.py"
PROMPT = "(raydebug) "


def test_ctrl_c_at_the_prompt_cancels_the_line_and_the_demo_goes_on():
    demo = pexpect.spawn(sys.executable, [str(DEMO)], encoding="utf-8", timeout=180,
                         dimensions=(40, 120), env=dict(os.environ, NO_COLOR="1"))
    if os.environ.get("RAYDEBUG_TEST_TRANSCRIPT"):
        demo.logfile_read = sys.stdout
    try:
        demo.expect_exact("continues by itself after 300 s")  # said up front
        demo.expect_exact(PROMPT)
        demo.send("p half a line")
        demo.sendintr()  # as in pdb: the line is gone, a fresh prompt, nothing else
        demo.expect_exact(PROMPT)
        for _ in range(3):  # the task, the actor, the post-mortem
            demo.sendline("c")
            demo.expect_exact(["returned; the process runs on", "the exception goes on"])
        demo.expect_exact("demo complete", timeout=120)
        demo.expect(pexpect.EOF)
        assert "KeyboardInterrupt" not in str(demo.before)
        demo.close()
        assert demo.exitstatus == 0
    finally:
        end_spawned(demo, group=True)  # the demo and the local Ray it started


def test_the_demos_hint_to_come_back_works_pasted_into_a_shell_without_raydebug_on_path():
    """`make demo` runs the venv's python: `raydebug` is on no PATH, and the hint it gave
    when the debugger was left (`raydebug attach --follow --hub ...`) was `command not
    found`. The hint, run by a shell from the checkout, takes the user back."""
    path = os.pathsep.join(folder for folder in os.environ.get("PATH", "").split(os.pathsep)
                           if not (Path(folder) / "raydebug").exists())
    env = dict(os.environ, NO_COLOR="1", PATH=path)
    root = DEMO.parents[1]
    demo = pexpect.spawn(sys.executable, [str(DEMO)], encoding="utf-8", timeout=180,
                         dimensions=(40, 120), env=env, cwd=str(root))
    back = None
    try:
        demo.expect_exact(PROMPT)
        demo.sendline("q")
        demo.expect(r"continued: ([^\r\n]+)\r\n")
        hint = str(demo.match.group(1))
        assert hint.startswith(".venv/bin/raydebug attach --follow --hub "), hint
        back = pexpect.spawn("bash", ["-c", hint], encoding="utf-8", timeout=180,
                             dimensions=(40, 120), env=env, cwd=str(root))
        for last in (False, True):  # the two sessions not left with `q` (which ran on)
            back.expect_exact(PROMPT)
            back.sendline("c")
            # After the last one the job completes and its cluster, the hub with it, may
            # stop before the session's end is said: both say the session is over.
            back.expect_exact(["returned; the process runs on", "the exception goes on",
                               *(["has gone away"] if last else [])])
        demo.expect_exact("demo complete", timeout=120)
        demo.expect(pexpect.EOF)
        assert "command not found" not in str(back.before)
    finally:
        for each in (back, demo):
            if each is not None:
                end_spawned(each, group=True)
