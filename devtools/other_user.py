"""Running raydebug as another Unix user in tests where permissions matter, even from a
checkout that user cannot read (a fresh clone under ``mktemp -d`` is mode 0700, and so is
a venv inside it).

:func:`copy_packages` copies raydebug and the distributions it requires to a directory any
user reads (a ``PYTHONPATH``); :func:`python_for_user` finds an interpreter the user runs
that imports what a test needs from there."""

from __future__ import annotations

import compileall
import importlib.metadata
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

import raydebug

OTHER_UID = 1000  # a user this machine has (Debian's first user), for tests that need no new one


def run_as(uid: int, gid: int) -> list[str]:
    """The command prefix that runs what follows as ``uid``:``gid``, with no other groups."""
    return ["setpriv", f"--reuid={uid}", f"--regid={gid}", "--clear-groups"]


def required_distributions(name: str) -> list[importlib.metadata.Distribution]:
    """The installed distributions that ``name`` requires, directly or not (not its extras')."""
    found: dict[str, importlib.metadata.Distribution] = {}
    wanted = [Requirement(text) for text in importlib.metadata.requires(name) or []]
    while wanted:
        requirement = wanted.pop()
        if requirement.marker is not None and not requirement.marker.evaluate({"extra": ""}):
            continue
        key = canonicalize_name(requirement.name)
        if key not in found:
            found[key] = importlib.metadata.distribution(requirement.name)
            wanted += [Requirement(text) for text in found[key].requires or []]
    return list(found.values())


def copy_packages() -> Path:
    """A new directory any user can read, for ``PYTHONPATH``: raydebug (from the source it
    was imported from) and the distributions it requires. The caller removes it."""
    root = Path(tempfile.mkdtemp(prefix="raydebug-packages-"))
    shutil.copytree(Path(raydebug.__file__).parent, root / "raydebug",
                    ignore=shutil.ignore_patterns("__pycache__"))
    compileall.compile_dir(root / "raydebug", quiet=1)  # the other user could not write them
    for distribution in required_distributions("raydebug"):
        for file in distribution.files or []:
            if ".." not in file.parts:  # (its scripts are in the venv's bin)
                (root / file).parent.mkdir(parents=True, exist_ok=True)
                shutil.copy(Path(str(distribution.locate_file(file))), root / file)
    for path in (root, *root.rglob("*")):
        path.chmod(path.stat().st_mode | (0o555 if path.is_dir() else 0o444))
    return root


def python_for_user(uid: int, gid: int, packages: Path, *modules: str) -> str:
    """An interpreter ``uid`` can run that imports ``modules`` from ``packages``: ours, else
    our venv's base interpreter (a venv in a directory only we can read cannot be run by
    another user), else the system's. Raises LookupError naming what each one said."""
    tried = []
    for python in dict.fromkeys([sys.executable, getattr(sys, "_base_executable", None),
                                 os.path.realpath(sys.executable), "/usr/bin/python3"]):
        if python is None:
            continue
        try:
            probe = subprocess.run([*run_as(uid, gid), python, "-c",
                                    "import " + ", ".join(modules)],
                                   env=user_env(packages), capture_output=True, text=True,
                                   timeout=60, check=False)
        except OSError as error:
            tried.append(f"{python}: {error}")
            continue
        if probe.returncode == 0:
            return python
        tried.append(f"{python}: {(probe.stderr.strip().splitlines() or ['?'])[-1]}")
    raise LookupError("; ".join(tried))


def user_env(packages: Path, **variables: str) -> dict[str, str]:
    """Another user's environment: our PATH, no home, ``packages`` to import from."""
    return {"PATH": os.environ["PATH"], "HOME": "/nonexistent",
            "PYTHONPATH": str(packages), **variables}
