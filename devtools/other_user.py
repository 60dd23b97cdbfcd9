"""Running raydebug as another Unix user (uid 1000) in tests where permissions matter, even
from a checkout that user cannot read (a fresh clone under ``mktemp -d`` is mode 0700).

:func:`other_user_python` answers an interpreter that user can run (the venv's, the one
it links to, or the system's) and the ``PYTHONPATH`` under which it imports this
checkout's raydebug and what it needs: the checkout's ``src`` when the user can read it,
else a copy, made once, of the packages the given modules import (from ``src`` and the
venv's site-packages) in a directory of mode 0755."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from .pythons import SOURCE

OTHER_UID = 1000
AS_OTHER_USER = ["setpriv", "--reuid", str(OTHER_UID), "--regid", str(OTHER_UID),
                 "--clear-groups"]

# Which top-level packages (and single modules) ``modules`` bring in from outside the
# standard library, and where each is: {"name": "path of its package dir or file"}.
_CLOSURE = """
import importlib, json, os, sys, sysconfig
for name in sys.argv[1:]:
    importlib.import_module(name)
paths = sysconfig.get_paths()
outside = (paths["purelib"], paths["platlib"], *os.environ["PYTHONPATH"].split(os.pathsep))
found = {}
for name, module in list(sys.modules.items()):
    path = getattr(module, "__file__", None)
    if not path or not path.startswith(outside) or "." in name:
        continue
    package = getattr(module, "__path__", None)
    found[name] = list(package)[0] if package else path
print(json.dumps(found))
"""

_copies: dict[tuple[str, ...], Path] = {}


def can_import(python: str, pythonpath: str, *modules: str) -> bool:
    """Whether uid 1000 runs ``python`` and imports ``modules`` under ``pythonpath``."""
    try:
        probe = subprocess.run([*AS_OTHER_USER, python, "-c", "import " + ", ".join(modules)],
                               env={**_plain_env(), "PYTHONPATH": pythonpath},
                               capture_output=True, timeout=60, check=False)
    except OSError:
        return False
    return probe.returncode == 0


def other_user_python(*modules: str) -> tuple[str, str] | None:
    """An interpreter uid 1000 can run and the ``PYTHONPATH`` under which it imports
    ``modules`` of this checkout (see the module docstring), or None. The copy, if one was
    needed, lives until :func:`remove_copies`. ``RAYDEBUG_TEST_COPY_RUNTIME=1`` makes the
    copy even where the checkout is readable (to try this path)."""
    forced = os.environ.get("RAYDEBUG_TEST_COPY_RUNTIME") == "1"
    for python in dict.fromkeys([sys.executable, os.path.realpath(sys.executable),
                                 "/usr/bin/python3"]):
        if not forced and can_import(python, str(SOURCE), *modules):
            return python, str(SOURCE)
        key = tuple(sorted(modules))
        if key not in _copies:
            _copies[key] = _copy_closure(modules)
        if can_import(python, str(_copies[key]), *modules):
            return python, str(_copies[key])
    return None


def remove_copies() -> None:
    while _copies:
        shutil.rmtree(_copies.popitem()[1], ignore_errors=True)


def _copy_closure(modules: tuple[str, ...]) -> Path:
    listed = subprocess.run([sys.executable, "-c", _CLOSURE, *modules],
                            env={**_plain_env(), "PYTHONPATH": str(SOURCE)},
                            capture_output=True, text=True, timeout=60, check=True)
    directory = Path(tempfile.mkdtemp(prefix="raydebug-test-runtime-"))
    directory.chmod(0o755)
    for where in json.loads(listed.stdout).values():
        source = Path(where)
        if source.name == "__init__.py":
            source = source.parent
        if source.is_dir():
            shutil.copytree(source, directory / source.name, dirs_exist_ok=True,
                            ignore=shutil.ignore_patterns("__pycache__"))
        elif source.is_file():
            shutil.copy2(source, directory / source.name)
    for path in [directory, *directory.rglob("*")]:  # readable whatever the umask
        path.chmod(0o755 if path.is_dir() else 0o644)
    return directory


def _plain_env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items()
            if not k.startswith(("RAYDEBUG_", "PYTHON"))}
