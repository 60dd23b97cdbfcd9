"""Snapshots of plain processes: an uncaught exception (main thread or another thread)
under ``raydebug run --snapshots`` is captured, the process fails at once as without
raydebug, and the hub keeps the snapshot after the process is gone, across a restart with
``--snapshot-dir``."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from helpers import HubProcess, finish, line_of, raydebug, start_hub, write_script

pytestmark = pytest.mark.integration

FAILING = """
import threading

def load(path):
    config = {"lr": 0.1, "layers": [{"units": 8, "act": "relu"}]}
    attempts = 3
    raise KeyError(path)  # raised here

def background():
    numbers = [1, 2, 3]
    raise RuntimeError("thread failed")  # raised in the thread

thread = threading.Thread(target=background, name="loader")
thread.start()
thread.join()
load("weights.bin")
"""


def run_with_snapshots(hub: HubProcess, script: Path) -> subprocess.Popen[str]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "raydebug", "run", "--snapshots", "--", sys.executable,
         str(script)], env=hub.env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        text=True)
    hub.workers.append(proc)
    return proc


def wait_snapshots(hub: HubProcess, count: int) -> list[dict[str, Any]]:
    return list(hub.wait_listing("/api/snapshots", f"{count} snapshots", lambda answer:
                                 answer["snapshots"] if len(answer["snapshots"]) >= count
                                 else None))


def value(values: list[dict[str, Any]], name: str) -> dict[str, Any]:
    return next(found for found in values if found["name"] == name)


def test_a_failing_process_leaves_its_snapshots_kept_across_a_hub_restart(tmp_path: Path):
    directory = tmp_path / "snapshots"
    script = write_script(tmp_path, "failing.py", FAILING)
    with start_hub("--snapshot-dir", str(directory)) as hub:
        code, _out, err = finish(run_with_snapshots(hub, script))
        # It failed as Python fails: the traceback, exit status 1, nothing of raydebug's.
        assert code == 1 and err.rstrip().endswith("KeyError: 'weights.bin'"), err
        assert "RuntimeError: thread failed" in err and "raydebug" not in err, err
        main, thread = sorted(wait_snapshots(hub, 2), key=lambda row: row["thread_name"])
        assert main["thread_name"] == "MainThread" and thread["thread_name"] == "loader"
        assert main["exception"] == "KeyError: 'weights.bin'"
        assert (main["function"], main["line"]) == ("load", line_of(script, "raised here"))
        assert thread["exception"] == "RuntimeError: thread failed"
        full = hub.get(f"/api/snapshot?id={main['id']}")
        top = full["frames"][0]
        assert top["source"].splitlines()[top["line"] - 1].endswith("# raised here")
        assert value(top["locals"], "attempts")["repr"] == "3"
        config = value(top["locals"], "config")
        layer = value(value(config["children"], "['layers']")["children"], "[0]")
        assert value(layer["children"], "['units']")["repr"] == "8"
        listed = raydebug(hub, "list")
        assert "KeyError: 'weights.bin'" in listed.stdout and "load" in listed.stdout, listed
    with start_hub("--snapshot-dir", str(directory)) as again:
        assert {row["id"] for row in again.get("/api/snapshots")["snapshots"]} == \
            {main["id"], thread["id"]}
        cleared = raydebug(again, "snapshots", "--clear")
        assert cleared.stdout.strip() == "2 snapshots dropped", cleared
        assert again.get("/api/snapshots")["snapshots"] == []
        assert list(directory.iterdir()) == []


LOOP = """
input()  # linked and armed: go
total = 0
for i in range(5):
    total += i * 10  # snapshot point
print("done", total, flush=True)
"""


def test_a_snapshot_point_captures_once_and_never_pauses(hub: HubProcess, tmp_path: Path):
    script = write_script(tmp_path, "loop.py", LOOP)
    line = line_of(script, "snapshot point")
    armed = raydebug(hub, "break", f"{script}:{line}", "--snapshot")
    assert armed.returncode == 0, armed.stderr
    assert f"{script}:{line} snapshot (first hit per process)" in armed.stdout, armed.stdout
    proc = hub.spawn_linked(script)
    code, out, err = finish(proc)
    assert code == 0 and out.strip() == "done 100", (out, err)  # it never waited
    [row] = wait_snapshots(hub, 1)
    assert row["reason"] == "snapshot" and row["pid"] == proc.pid
    assert (row["function"], row["line"]) == ("<module>", line)
    assert hub.get("/api/sessions") == []  # nothing paused, ever
    top = hub.get(f"/api/snapshot?id={row['id']}")["frames"][0]
    assert (value(top["locals"], "i")["repr"], value(top["locals"], "total")["repr"]) == \
        ("0", "0")


def test_without_a_hub_the_failure_goes_on_and_says_no_snapshot_was_taken(tmp_path: Path):
    script = write_script(tmp_path, "failing.py", FAILING)
    env = {name: value for name, value in os.environ.items()
           if not name.startswith("RAYDEBUG_")}
    done = subprocess.run(
        [sys.executable, "-m", "raydebug", "run", "--snapshots", "--", sys.executable,
         str(script)], env={**env, "XDG_STATE_HOME": str(tmp_path / "no-hub-here")},
        capture_output=True, text=True, timeout=60)
    assert done.returncode == 1 and done.stderr.rstrip().endswith("KeyError: 'weights.bin'")
    said = [line for line in done.stderr.splitlines() if line.startswith("raydebug:")]
    assert said and all(line.endswith("; no snapshot taken") for line in said), done.stderr
