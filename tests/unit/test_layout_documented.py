"""The tree is documented where a newcomer looks: the README's layout section names every
package and top-level module, and each package's docstring names each of its modules."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "src" / "raydebug"


def _layout_section() -> str:
    readme = (ROOT / "README.md").read_text()
    section = readme[readme.index("## Layout"):]
    opening = section.index("```")
    return section[opening:section.index("```", opening + 3)]


def test_the_readme_layout_names_every_package_and_top_level_module():
    layout = _layout_section()
    packages = [p.name for p in PACKAGE.iterdir() if (p / "__init__.py").exists()]
    modules = [p.name for p in PACKAGE.glob("*.py") if not p.name.startswith("__")]
    missing = [f"src/raydebug/{name}/" for name in packages
               if f"src/raydebug/{name}/" not in layout]
    missing += [name for name in modules if name not in layout]
    assert not missing, f"README's layout section does not name: {', '.join(missing)}"


def test_each_package_docstring_names_its_modules():
    missing = []
    for init in sorted(PACKAGE.rglob("__init__.py")):
        doc = ast.get_docstring(ast.parse(init.read_text())) or ""
        missing += [f"{init.parent.relative_to(PACKAGE.parent)}/{module.name}"
                    for module in sorted(init.parent.glob("*.py"))
                    if module.name != "__init__.py" and f"``{module.stem}``" not in doc
                    and f":mod:`.{module.stem}`" not in doc]
    assert not missing, f"not named in their package's docstring: {', '.join(missing)}"
