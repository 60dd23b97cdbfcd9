"""What the docs and docstrings point at exists: after a module moves, a reference to its
old place is found here, not by a newcomer.

Checked: each ``:mod:``/``:class:``/``:func:``/``:meth:``/``:attr:``/``:data:``/``:exc:``
reference in ``src/raydebug`` names something the package defines (a module, or a
function, class, attribute or name in one; a relative or partial name is found by its
tail, as Sphinx finds it); each ``raydebug.x.y`` in backticks in the source, README.md and
docs/ is such a name too; each path in backticks under one of the package's folders
(```hub/http/exchange.py```, ```agent/armed/```) exists.
"""

from __future__ import annotations

import ast
import importlib.util
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "src" / "raydebug"
ROLE = re.compile(r":(?:mod|class|func|meth|attr|data|exc|obj):`~?([\w.]+)`")
DOTTED = re.compile(r"`+(raydebug(?:\.\w+)+)")
FOLDERS = "|".join(p.name for p in PACKAGE.iterdir() if (p / "__init__.py").exists())
PATH = re.compile(rf"`+((?:{FOLDERS})/[\w/]*\w)(\.py)?/?`")


def _module_name(path: Path) -> str:
    parts = path.with_suffix("").relative_to(PACKAGE.parent).parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _add_definitions(names: set[str], prefix: str, body: list[ast.stmt]) -> None:
    for node in body:
        if isinstance(node, ast.ClassDef):  # its bases' names, as "Class<Base"
            names.update(f"{node.name}<{base.id}" for base in node.bases
                         if isinstance(base, ast.Name))
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(f"{prefix}.{node.name}")
            _add_definitions(names, f"{prefix}.{node.name}", node.body)
            for inner in ast.walk(node):  # self.x = ...: an attribute of the class
                if (isinstance(inner, ast.Attribute) and isinstance(inner.ctx, ast.Store)
                        and isinstance(inner.value, ast.Name) and inner.value.id == "self"):
                    names.add(f"{prefix}.{inner.attr}")
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names.update(f"{prefix}.{name.id}" for target in targets
                         for name in ast.walk(target) if isinstance(name, ast.Name))
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update(f"{prefix}.{(alias.asname or alias.name).split('.')[0]}"
                         for alias in node.names)
        elif isinstance(node, (ast.If, ast.Try)):
            _add_definitions(names, prefix, [*node.body, *node.orelse])


def defined_names() -> set[str]:
    """Every module of the package and every name defined in one, dotted in full (and
    each class's bases, as ``Class<Base``)."""
    names: set[str] = set()
    for path in PACKAGE.rglob("*.py"):
        module = _module_name(path)
        names.add(module)
        _add_definitions(names, module, ast.parse(path.read_text(encoding="utf-8")).body)
    return names


def resolves(reference: str, names: set[str], seen: frozenset[str] = frozenset()) -> bool:
    """Whether ``reference`` (``.Relative.name``, ``Class.method``, a full name) is one of
    ``names`` or the tail of one, or a member a class inherits; a name outside raydebug
    (``click.UsageError``, ``asyncio.timeout``) passes when its top module can be
    imported."""
    tail = reference.lstrip(".")
    if any(name == tail or name.endswith("." + tail) for name in names):
        return True
    owner, _, member = tail.rpartition(".")
    owner_class = owner.rpartition(".")[2]
    if owner_class and owner_class not in seen and any(
            resolves(f"{base}.{member}", names, seen | {owner_class})
            for base in (name.partition("<")[2] for name in names
                         if name.startswith(owner_class + "<"))):
        return True
    top = tail.split(".")[0]
    return top != "raydebug" and "." in tail and importlib.util.find_spec(top) is not None


def broken_references() -> list[str]:
    names = defined_names()
    broken = []
    texts = [*sorted(PACKAGE.rglob("*.py")), ROOT / "README.md",
             *sorted((ROOT / "docs").glob("*.md"))]
    for path in texts:
        where = path.relative_to(ROOT)
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            found = DOTTED.findall(line)
            if path.suffix == ".py":
                found += ROLE.findall(line)
            broken += [f"{where}:{number}: {name}" for name in found
                       if not resolves(name, names)]
            broken += [f"{where}:{number}: {folder}{suffix}"
                       for folder, suffix in PATH.findall(line)
                       if not (PACKAGE / (folder + suffix)).exists()]
    return broken


def test_each_reference_names_what_exists():
    broken = broken_references()
    assert not broken, "references to nothing (moved or renamed?):\n" + "\n".join(broken)


def test_a_moved_name_is_not_found():
    names = {"raydebug.terminal.remote", "raydebug.terminal.remote.Stops",
             "raydebug.terminal.remote.Stops.ended", "raydebug.terminal.remote.Remote.stops"}
    assert resolves("Stops.ended", names) and resolves(".remote.Stops", names)
    assert not resolves("stops.ended", names)
    assert not resolves("raydebug.terminal.gone", names)
    assert resolves("click.UsageError", names) and not resolves("nowhere.Thing", names)
