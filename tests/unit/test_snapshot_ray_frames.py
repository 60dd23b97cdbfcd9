"""A Ray task's failure snapshot, in memory: its frames and its traceback text are the user's,
from the task's function in, without the frames of Ray's task executor that ran it and
caught the exception (``_raylet.pyx``'s, Ray's wrappers, the standard library between)."""

from __future__ import annotations

import functools
import os
from collections.abc import Callable
from typing import Any

import pytest
from test_snapshot_sender import RecordingLink

import raydebug.agent
from raydebug.agent import snapshot_sender
from raydebug.integrations.ray import worker_hooks
from raydebug.protocol.control import SnapshotTaken
from raydebug.snapshots.limits import RateLimit, SnapshotLimits

# Ray's executor as a traceback shows it: Cython's frames name the .pyx as it was compiled.
RAYLET = """
def execute_task(run, on_failure):
    try:
        run()
    except Exception:
        on_failure()  # Ray's failure hook, inside its handler
"""
FUTURES = "def result(run):\n    run()\n"  # an async actor's method comes through one
WRAPPER = "def actor_method_executor(run):\n    run()\n"


def ray_code(source: str, path: str) -> Callable[..., Any]:
    namespace: dict[str, Any] = {}
    exec(compile(source, path, "exec"), namespace)
    return next(value for name, value in namespace.items() if not name.startswith("__"))


def fit(epochs: int) -> None:
    weights = [0.5] * epochs
    raise ValueError(f"diverged after {len(weights)}")  # the user's raise


@pytest.fixture
def link(monkeypatch: pytest.MonkeyPatch) -> RecordingLink:
    recording = RecordingLink()
    monkeypatch.setenv("RAYDEBUG_SNAPSHOTS", "1")
    monkeypatch.delenv("RAYDEBUG_POST_MORTEM", raising=False)
    monkeypatch.delenv("RAY_DEBUG_POST_MORTEM", raising=False)
    monkeypatch.setattr(raydebug.agent, "get_agent", lambda: type("A", (), {"link": recording}))
    monkeypatch.setattr(snapshot_sender, "_rate", RateLimit(SnapshotLimits(burst=5)))
    # The task's ids come from Ray's runtime context, which would start a Ray here.
    monkeypatch.setattr(worker_hooks, "failing_task_fields", lambda error: {})
    return recording


def run_as_ray_does(task: Callable[[], None]) -> None:
    execute_task = ray_code(RAYLET, "python/ray/_raylet.pyx")
    result = ray_code(FUTURES, os.path.join(os.path.dirname(functools.__file__),
                                            "concurrent", "futures", "_base.py"))
    wrapper = ray_code(WRAPPER, os.path.join(worker_hooks.RAY_DIR, "_private",
                                             "function_manager.py"))
    execute_task(functools.partial(result, functools.partial(wrapper, task)),
                 worker_hooks.on_task_failure)


def test_a_failing_tasks_snapshot_starts_at_the_users_frames(link: RecordingLink):
    run_as_ray_does(functools.partial(fit, 3))
    [(message, _)] = link.posted
    assert isinstance(message, SnapshotTaken)
    snapshot = message.snapshot
    assert [frame["function"] for frame in snapshot["frames"]] == ["fit"]
    assert {value["name"] for value in snapshot["frames"][0]["locals"]} == {"epochs", "weights"}
    text = snapshot["exception"]["traceback"]
    assert "_raylet.pyx" not in text and "function_manager" not in text, text
    assert "futures" not in text and "in fit" in text, text


def test_a_failure_in_rays_own_code_keeps_its_whole_traceback(link: RecordingLink):
    failing = ray_code("def deserialize():\n    raise TypeError('bad arguments')\n",
                       os.path.join(worker_hooks.RAY_DIR, "_private", "serialization.py"))
    run_as_ray_does(failing)
    [(message, _)] = link.posted
    assert isinstance(message, SnapshotTaken)
    functions = [frame["function"] for frame in message.snapshot["frames"]]
    assert functions == ["deserialize", "actor_method_executor", "result", "execute_task"]
