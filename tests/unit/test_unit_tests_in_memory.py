"""The tests under ``tests/unit`` (what ``-m "not integration"`` runs) start nothing real that
is slow or shared: no Ray, no hub subprocess, no debugged process through a hub, no
pseudo-terminal, sshd or browser. They reach those only through the helpers below, so none
of them may import one; a test that needs one belongs under ``tests/integration``, where it
carries the ``integration`` marker."""

from __future__ import annotations

import ast
from pathlib import Path

UNIT = Path(__file__).resolve().parent

# What starts real processes for a test (these modules and their submodules): a hub
# subprocess and debugged scripts, a Ray cluster or head, Chromium, a pseudo-terminal, an
# IDE-like client of a real hub, another Python's venv.
STARTS_REAL_THINGS = (
    "helpers", "ray_cluster", "browser", "cluster_ide", "websocket_client",
    "devtools.processes", "devtools.dap_cycles", "devtools.ide", "devtools.pythons",
    "devtools.terminal", "ray.cluster_utils", "ray.scripts", "selenium", "pexpect",
)
# ``import ray`` (for ``ray.init``); a piece of Ray's library used in memory is fine.
STARTS_RAY = "ray"


def _imports(path: Path) -> set[str]:
    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names.add(node.module)
            names.update(f"{node.module}.{alias.name}" for alias in node.names)
    return names


def test_no_unit_test_imports_what_starts_real_processes():
    found = {}
    for path in sorted(UNIT.glob("*.py")):
        imported = _imports(path)
        starts = sorted(name for name in imported for real in STARTS_REAL_THINGS
                        if name == real or name.startswith(real + "."))
        starts += [STARTS_RAY] if STARTS_RAY in imported else []
        if starts:
            found[path.name] = starts
    assert not found, f"move these to tests/integration (they start real things): {found}"
