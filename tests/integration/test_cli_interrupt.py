"""Ctrl-C while the ``raydebug`` command is still importing leaves quietly (status 130), as
one pressed later does: no traceback of the interrupted import.

The command's imports take ~0.1-0.3 s; to press Ctrl-C inside them every time, a ``click``
placed first on ``PYTHONPATH`` says it is being imported, then waits: the real console
script and ``python -m raydebug`` run, and SIGINT comes while they import it.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

SLOW_CLICK = """
import os, time
open(os.environ["RAYDEBUG_TEST_IMPORTING"], "w").close()
time.sleep(60)
"""


@pytest.mark.parametrize("how", ["console script", "python -m raydebug"])
def test_ctrl_c_during_the_commands_imports_leaves_without_a_traceback(tmp_path: Path,
                                                                         how: str):
    (tmp_path / "click.py").write_text(SLOW_CLICK)
    importing = tmp_path / "importing"
    command = ([str(Path(sys.executable).parent / "raydebug"), "list"]
               if how == "console script" else [sys.executable, "-m", "raydebug", "list"])
    env = {**os.environ, "PYTHONPATH": str(tmp_path), "RAYDEBUG_TEST_IMPORTING": str(importing)}
    proc = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    try:
        deadline = time.monotonic() + 30
        while not importing.exists():  # (a file: the only sign from inside an import)
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline, "the command never imported click"
            time.sleep(0.02)
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(30)
    assert "Traceback" not in err, err
    assert proc.returncode == 130, (proc.returncode, err)
