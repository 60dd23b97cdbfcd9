"""raydebug's import graph, read from the source with ``ast`` (nothing is imported).

Every ``import`` and ``from ... import`` in a module counts, those inside functions included
(a lazy import is still a dependency), relative ones resolved. ``from package import name``
depends on ``package.name`` when that is a module, else on ``package``. The parents a
submodule's import also runs (``package/__init__.py``) are not edges.
"""

from __future__ import annotations

import ast
from pathlib import Path

import raydebug

SOURCE = Path(raydebug.__file__).resolve().parent


def module_names(root: Path) -> dict[str, Path]:
    """Every module under ``root`` (a package directory), by dotted name."""
    names = {}
    for path in sorted(root.rglob("*.py")):
        parts = list(path.relative_to(root.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        names[".".join(parts)] = path
    return names


def import_graph(root: Path) -> dict[str, set[str]]:
    """Module -> the modules of the same package tree it imports (anywhere in its body)."""
    modules = module_names(root)
    graph: dict[str, set[str]] = {name: set() for name in modules}
    for name, path in modules.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    anchor = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                    base = ".".join([*anchor, *([node.module] if node.module else [])])
                targets = [f"{base}.{alias.name}" if f"{base}.{alias.name}" in modules else base
                           for alias in node.names]
            graph[name].update(target for target in targets
                               if target in modules and target != name)
    return graph
