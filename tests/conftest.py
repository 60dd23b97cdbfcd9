from __future__ import annotations

import ast
import contextlib
import functools
import json
import os
import signal
import sys
import tempfile
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

# tests/ for `helpers`, the repository's root for `devtools` (shared with bench/).
sys.path.insert(0, str(Path(__file__).parent))
sys.path.insert(0, str(Path(__file__).parent.parent))

from helpers import HubProcess, start_hub

# Every hub, CLI and debuggee a test starts imports raydebug from the source tree: let the
# first write its bytecode and the rest read it. The environment's PYTHONDONTWRITEBYTECODE=1
# (this machine's shell and .ci/run set it) made each compile raydebug's modules again: a
# hub's imports took 0.9 s of CPU instead of 0.3, a few hundred times a run.
os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
sys.dont_write_bytecode = False
# Hubs started by tests record themselves in a state file (see raydebug.state_file): keep
# those out of the real home directory. Tests that need their own set it per process.
os.environ["XDG_STATE_HOME"] = tempfile.mkdtemp(prefix="raydebug-test-state-")
# A shell without job control starts a background command with SIGINT ignored, and an
# ignored signal stays ignored across exec: every program a test starts would then take no
# Ctrl-C. The tests that send one need its default, so give it back to this process (from
# which the programs the tests start inherit it).
if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)
# pytest-xdist's workers get COLUMNS=80 and LINES=24, which every program they start would
# take over the size of the terminal a test gives it: the terminal tests set that size.
if os.environ.get("PYTEST_XDIST_WORKER"):
    os.environ.pop("COLUMNS", None)
    os.environ.pop("LINES", None)
    # Each worker's Ray clusters keep to a temp dir of the worker's own: a plain
    # `ray.init()` joins the cluster named in <temp dir>/ray/ray_current_cluster, which the
    # other worker's `Cluster` writes too. Short: Ray's socket paths are limited to 107 bytes.
    os.environ["RAY_TMPDIR"] = tempfile.mkdtemp(
        prefix=f"rd{os.environ['PYTEST_XDIST_WORKER']}-", dir="/tmp")


@pytest.fixture
def hub() -> Iterator[HubProcess]:
    """A real hub subprocess; every process spawned through it is stopped afterwards."""
    process = start_hub()
    try:
        yield process
    finally:
        process.close()


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Every test under ``tests/integration`` drives real processes: it carries the
    ``integration`` marker whether or not its module says so, so that
    ``-m "not integration"`` (``make check``) runs the in-memory tests only. The units of
    work (:func:`unit_of`) are ordered longest first, a unit's files together."""
    integration = Path(__file__).parent / "integration"
    for item in items:
        if integration in Path(str(item.fspath)).parents:
            item.add_marker(pytest.mark.integration)
    paths = {item: _path_of(item) for item in items}
    seconds = Counter[str]()
    for path in set(paths.values()):
        seconds[unit_of(path)] += _FILE_SECONDS.get(path, UNMEASURED_SECONDS)
    items.sort(key=lambda item: (-seconds[unit_of(paths[item])], unit_of(paths[item])))


def _path_of(item: pytest.Item) -> str:
    return Path(str(item.fspath)).relative_to(ROOT).as_posix()


ROOT = Path(__file__).resolve().parents[1]


@functools.cache
def unit_of(path: str) -> str:
    """The unit of work the test file ``path`` (relative to the repository) belongs to, which
    ``make test`` hands to one worker whole: its own path; "the default port" for the files
    below; or, for a module whose ``cluster`` fixture asks for plain nodes (a literal
    ``RAY_NODES`` of CPU counts only), those nodes, shared with the other modules that ask
    for the same: run one after another, they start one cluster (the fixture keeps it, see
    tests/integration/conftest.py). Read from the file's source: pytest-xdist's controller
    (:func:`pytest_xdist_make_scheduler`) does not import the test modules."""
    if path in ON_THE_DEFAULT_PORT:
        return "the default port"
    if not path.startswith("tests/integration/"):  # no Ray there: not read
        return path
    try:
        module = ast.parse((ROOT / path).read_text())
    except (OSError, SyntaxError):
        return path
    for statement in module.body:
        if isinstance(statement, ast.Assign) and any(
                isinstance(target, ast.Name) and target.id == "RAY_NODES"
                for target in statement.targets):
            with contextlib.suppress(ValueError):
                nodes = ast.literal_eval(statement.value)
                if all(set(node) == {"num_cpus"} for node in nodes):
                    return "Ray nodes of " + "+".join(str(node["num_cpus"]) for node in nodes) \
                        + " CPUs"
    return path


# The order the units of work are handed to the workers (``--dist loadfile
# --no-loadscope-reorder`` gives each free worker the next unit in collection order; without
# the second option pytest-xdist orders them by their count of tests): the longest unit
# first, so that no long file starts late and ends last (a fresh-clone run lost ~80 s of its
# ~580 to that tail). The seconds are measured (``tests/file_durations.json``, see
# ``devtools/file_durations.py``); a file not measured yet counts as a middling one. A
# stable sort: a unit's tests keep their order.
_FILE_SECONDS: dict[str, float] = json.loads(
    (Path(__file__).parent / "file_durations.json").read_text())
UNMEASURED_SECONDS = 5.0


# The Ray demo's tests and the web page's: their cluster's hub takes the default client port
# (5678) when it is free, and what they run finds it there, so two of them at once on two
# workers reached each other's hub (a fresh-clone run: the demo's `attach --follow` was told
# its hub had gone away). They run one after another, on one worker.
ON_THE_DEFAULT_PORT = frozenset({"tests/integration/test_demo.py",
                                 "tests/integration/test_demo_terminal.py",
                                 "tests/integration/test_web_page.py"})


def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """``--dist loadfile`` (``make test``), a unit of work being :func:`unit_of`'s."""
    if config.getvalue("dist") != "loadfile":
        return None
    from xdist.scheduler import LoadFileScheduling

    class Units(LoadFileScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return unit_of(nodeid.split("::", 1)[0])

    return Units(config, log)
