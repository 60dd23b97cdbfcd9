"""Every Python module under ``tests/`` that pytest imports by its file name has a name of
its own. The test folders have no ``__init__.py``, so pytest imports each test module (and a
test imports its folder's helpers) as a top-level module named after its file: a second
``test_x.py`` in another folder stops the whole collection with "import file mismatch"
(each ``conftest.py`` is pytest's own and may repeat)."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]
MAY_REPEAT = ("conftest.py", "__init__.py")


def same_names(root: Path) -> dict[str, list[str]]:
    """File name -> the paths (relative to ``root``) of the Python modules under ``root``
    that share it, for each name that two or more of them have."""
    found: dict[str, list[str]] = defaultdict(list)
    for path in sorted(root.rglob("*.py")):
        if path.name not in MAY_REPEAT and "__pycache__" not in path.parts:
            found[path.name].append(str(path.relative_to(root)))
    return {name: paths for name, paths in found.items() if len(paths) > 1}


def test_no_two_test_modules_share_a_name():
    repeated = same_names(TESTS)
    assert not repeated, "rename one of each (pytest stops collecting on the second):\n" + \
        "\n".join(", ".join(paths) for paths in repeated.values())


def test_a_name_in_two_folders_is_found(tmp_path: Path):
    for folder in ("unit", "integration"):
        (tmp_path / folder).mkdir()
        (tmp_path / folder / "test_x.py").write_text("")
        (tmp_path / folder / "conftest.py").write_text("")
    (tmp_path / "unit" / "test_y.py").write_text("")
    assert same_names(tmp_path) == {"test_x.py": ["integration/test_x.py", "unit/test_x.py"]}
