"""A hub started on this machine is found without flags or variables (its state file)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from helpers import HubProcess, finish, read_line, stop, write_script

pytestmark = pytest.mark.integration

WORKER = """
value = 41
breakpoint()
print("finished", value + 1, flush=True)
"""


def test_commands_and_workers_find_the_local_hub(tmp_path: Path):
    state = tmp_path / "state"
    env = {**os.environ, "XDG_STATE_HOME": str(state)}
    proc = subprocess.Popen([sys.executable, "-m", "raydebug", "hub", "--port", "0",
                             "--agent-port", "0"], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    worker = None
    try:
        words = read_line(proc).split()
        record_path = state / "raydebug" / "hub.json"
        record = json.loads(record_path.read_text())
        assert record["client"] == words[4] and record["worker"] == words[6]
        assert record_path.stat().st_mode & 0o777 == 0o600  # it holds the worker token
        host, port = words[4].rsplit(":", 1)
        whost, wport = words[6].rsplit(":", 1)
        hub = HubProcess(proc, (host, int(port)), (whost, int(wport)), record["token"])

        script = write_script(tmp_path, "worker.py", WORKER)
        bare = {k: v for k, v in env.items() if not k.startswith("RAYDEBUG_")}
        worker = subprocess.Popen([sys.executable, str(script)],  # no hub, no token given
                                  env={**bare, "PYTHONBREAKPOINT": "raydebug.set_trace"},
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        listed = subprocess.run([sys.executable, "-m", "raydebug", "list", "--json", "--wait",
                                 "1", "--timeout", "30"], env=bare, capture_output=True,
                                text=True, timeout=60)
        [session] = json.loads(listed.stdout)
        assert session["pid"] == worker.pid
        hub.attach_and_detach(session["id"])
        assert finish(worker)[0] == 0
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=30)
        assert not record_path.exists()  # a hub that exits takes its record with it
    finally:
        if worker is not None:
            stop(worker)
        stop(proc)


def test_a_crashed_hubs_record_is_ignored(tmp_path: Path):
    state = tmp_path / "state" / "raydebug"
    state.mkdir(parents=True)
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait(timeout=30)
    (state / "hub.json").write_text(json.dumps({
        "client": "127.0.0.1:1", "worker": "127.0.0.1:1", "token": "t", "pid": dead.pid}))
    env = {"PATH": "/usr/bin:/bin", "XDG_STATE_HOME": str(tmp_path / "state"),
           "PYTHONBREAKPOINT": "raydebug.set_trace"}
    script = write_script(tmp_path, "worker.py", WORKER)
    result = subprocess.run([sys.executable, str(script)], env=env, capture_output=True,
                            text=True, timeout=30)
    assert result.returncode == 0 and "finished 42" in result.stdout
    assert "no hub runs on this machine" in result.stderr  # not "cannot reach 127.0.0.1:1"
