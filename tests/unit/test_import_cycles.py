"""raydebug's modules import each other without cycles, and the agent does not pull in the hub.

The graph is read from the source with ``ast`` (nothing is imported): every ``import`` and
``from ... import`` in a module, those inside functions included (a lazy import is still a
dependency), relative ones resolved. ``from package import name`` depends on
``package.name`` when that is a module, else on ``package``. The parents a submodule's import
also runs (``package/__init__.py``) are not edges: every submodule would then form a cycle
with a package that re-exports it.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from devtools.import_graph import SOURCE, import_graph


def find_cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """One cycle (``[a, b, ..., a]``) per strongly connected group of modules (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    groups: list[set[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in sorted(graph[node]):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            group = set()
            while True:
                member = stack.pop()
                on_stack.discard(member)
                group.add(member)
                if member == node:
                    break
            if len(group) > 1:
                groups.append(group)

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return [_cycle_within(graph, group) for group in groups]


def _cycle_within(graph: dict[str, set[str]], group: set[str]) -> list[str]:
    """A shortest path from the group's first module back to itself, inside the group."""
    start = min(group)
    paths = {start: [start]}
    frontier = [start]
    while frontier:
        following = []
        for node in frontier:
            for target in sorted(graph[node] & group):
                if target == start:
                    return [*paths[node], start]
                if target not in paths:
                    paths[target] = [*paths[node], target]
                    following.append(target)
        frontier = following
    raise AssertionError(f"{sorted(group)} is not strongly connected")


def knot(graph: dict[str, set[str]], module: str) -> set[str]:
    """The modules that both import ``module`` (transitively) and are imported by it."""
    return {name for name in graph
            if name in _reach(graph, module) and module in _reach(graph, name)}


def _reach(graph: dict[str, set[str]], module: str) -> set[str]:
    seen: set[str] = set()
    pending = [module]
    while pending:
        name = pending.pop()
        if name not in seen:
            seen.add(name)
            pending.extend(graph[name])
    return seen


def closure(graph: dict[str, set[str]], module: str) -> set[str]:
    """Every module that importing ``module``'s package tree may import (itself included):
    the package and its submodules, and all they import, transitively."""
    seen: set[str] = set()
    pending = [name for name in graph if name == module or name.startswith(module + ".")]
    while pending:
        name = pending.pop()
        if name not in seen:
            seen.add(name)
            pending.extend(graph[name])
    return seen


def test_no_module_of_raydebug_is_part_of_an_import_cycle():
    graph = import_graph(SOURCE)
    cycles = find_cycles(graph)
    assert not cycles, "import cycles:\n" + "\n".join(
        f"{' -> '.join(cycle)}  (its knot: {', '.join(sorted(knot(graph, cycle[0])))})"
        for cycle in cycles)


def test_the_agent_imports_neither_the_hub_nor_an_integration():
    graph = import_graph(SOURCE)
    reached = closure(graph, "raydebug.agent")
    assert "raydebug.agent.link.hub_link" in reached  # the walk sees the agent's own modules
    forbidden = sorted(name for name in reached
                       if name.startswith(("raydebug.hub", "raydebug.integrations")))
    assert not forbidden, f"raydebug.agent's imports reach {forbidden}"


def test_only_the_hub_actor_imports_the_hub_in_the_ray_integration():
    graph = import_graph(SOURCE)
    importers = sorted(name for name, targets in graph.items()
                       if name.startswith("raydebug.integrations")
                       and any(target.startswith("raydebug.hub") for target in targets))
    assert importers == ["raydebug.integrations.ray.hub_actor"]


def test_the_walk_finds_a_cycle_through_a_lazy_relative_import_and_names_it(tmp_path: Path):
    package = tmp_path / "pkg"
    (package / "sub").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "a.py").write_text("from .sub import b\n")
    (package / "sub" / "__init__.py").write_text("")
    (package / "sub" / "b.py").write_text("def later():\n    from .. import a\n")
    (package / "c.py").write_text("import pkg.a\n")
    graph = import_graph(package)
    assert graph["pkg.c"] == {"pkg.a"} and graph["pkg.sub.b"] == {"pkg.a"}
    assert find_cycles(graph) == [["pkg.a", "pkg.sub.b", "pkg.a"]]
    assert closure(graph, "pkg.c") == {"pkg.c", "pkg.a", "pkg.sub.b"}


def test_importing_the_agent_imports_neither_ray_nor_the_hub():
    script = ("import sys, raydebug, raydebug.agent.link.hub_link, raydebug.agent.metadata; "
              "print(sorted(name for name in ('ray', 'raydebug.hub', 'raydebug.integrations') "
              "if name in sys.modules))")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=60, check=True)
    assert done.stdout.strip() == "[]", done.stderr
