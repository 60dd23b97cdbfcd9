"""The README's main job, `make demo`, as CI runs it: no terminal, so the scripted tour."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration

DEMO = Path(__file__).parents[2] / "examples" / "ray_demo.py"


def test_the_ray_demo_visits_task_actor_and_failing_task_then_completes():
    # Its own process group: a local Ray's processes are stopped with it on any failure.
    demo = subprocess.Popen([sys.executable, str(DEMO)], stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            start_new_session=True)
    try:
        out, _ = demo.communicate(timeout=240)
    finally:
        if demo.poll() is None:
            os.killpg(demo.pid, signal.SIGKILL)
            demo.wait(timeout=30)
    assert demo.returncode == 0, out
    assert out.count("(raydebug) p shard") == 3
    for who in ("task preprocess", "actor Trainer", "task validate"):
        assert who in out
    assert "post-mortem: ZeroDivisionError: division by zero" in out
    assert "── breakpoint 3 ──" in out
    assert "job complete: preprocess -> 46" in out and "demo complete" in out
    # ray.shutdown() takes the hub with the local cluster: nothing was lost, say nothing.
    assert "lost the connection" not in out and "cannot ask the Ray cluster" not in out, out
