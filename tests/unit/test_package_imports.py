"""Each subsystem imports only what its package docstring allows.

A package whose docstring has a ``May import:`` paragraph lists there, in double backticks,
the modules and packages outside itself that its modules may import (a listed package allows
its submodules too). The subsystems below must have one; any other package may.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

from devtools.import_graph import SOURCE, import_graph

MUST_SAY = ("raydebug.agent.armed", "raydebug.agent.debugger", "raydebug.agent.link",
            "raydebug.hub.agents", "raydebug.hub.clients", "raydebug.hub.http")


def allowed_imports(init: Path) -> list[str] | None:
    """The names of a package docstring's ``May import:`` paragraph, or None without one."""
    doc = ast.get_docstring(ast.parse(init.read_text(encoding="utf-8"))) or ""
    found = re.search(r"^May import:(.*?)(?:\n\n|\Z)", doc, re.MULTILINE | re.DOTALL)
    return re.findall(r"``([\w.]+)``", found.group(1)) if found else None


def package_rules(root: Path) -> dict[str, list[str] | None]:
    rules = {}
    for init in sorted(root.rglob("__init__.py")):
        parts = init.parent.relative_to(root.parent).parts
        rules[".".join(parts)] = allowed_imports(init)
    return rules


def outside_imports(graph: dict[str, set[str]], package: str, allowed: list[str]) -> set[str]:
    """``module -> target`` for each import leaving ``package`` to a name it does not allow."""
    inside = (package, package + ".")
    return {f"{name} -> {target}" for name, targets in graph.items()
            if name == package or name.startswith(package + ".")
            for target in targets
            if not target.startswith(inside) and target != package
            and not any(target == rule or target.startswith(rule + ".") for rule in allowed)}


def test_each_subsystem_says_what_it_may_import():
    rules = package_rules(SOURCE)
    silent = [name for name in MUST_SAY if rules.get(name) is None]
    assert not silent, f"no 'May import:' paragraph in the docstring of: {silent}"


def test_each_package_imports_only_what_its_docstring_allows():
    graph = import_graph(SOURCE)
    broken = sorted(edge for package, allowed in package_rules(SOURCE).items()
                    if allowed is not None
                    for edge in outside_imports(graph, package, allowed))
    assert not broken, "imports their package's docstring does not allow:\n" + "\n".join(broken)


def unused_allowances(graph: dict[str, set[str]], package: str, allowed: list[str]) -> list[str]:
    """The names ``allowed`` lists that no module of ``package`` imports (a stale line)."""
    imported = {target for name, targets in graph.items()
                if name == package or name.startswith(package + ".") for target in targets}
    return [rule for rule in allowed
            if not any(target == rule or target.startswith(rule + ".") for target in imported)]


def test_each_name_a_docstring_allows_is_imported():
    graph = import_graph(SOURCE)
    stale = sorted(f"{package}: {rule}" for package, allowed in package_rules(SOURCE).items()
                   if allowed is not None
                   for rule in unused_allowances(graph, package, allowed))
    assert not stale, "'May import:' names that nothing there imports:\n" + "\n".join(stale)


def test_an_import_the_docstring_does_not_list_is_found(tmp_path: Path):
    package = tmp_path / "pkg"
    (package / "sub").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "errors.py").write_text("")
    (package / "other.py").write_text("")
    (package / "sub" / "__init__.py").write_text(
        '"""A sub.\n\nMay import: ``pkg.errors``.\n"""\n')
    (package / "sub" / "a.py").write_text("from ..errors import x\nfrom .. import other\n"
                                          "from . import b\n")
    (package / "sub" / "b.py").write_text("")
    graph = import_graph(package)
    rules = package_rules(package)
    assert rules["pkg.sub"] == ["pkg.errors"] and rules["pkg"] is None
    assert outside_imports(graph, "pkg.sub", ["pkg.errors"]) == {"pkg.sub.a -> pkg.other"}
