"""Other Pythons for tests and benchmarks: pyenv's interpreters, each in a venv with this
venv's debugpy (:func:`python_for`; raydebug itself comes from the source tree through
PYTHONPATH), and one with this venv's Ray as well (:func:`ray_venv`: built once, kept under
``.venv/``)."""

from __future__ import annotations

import fcntl
import shutil
import subprocess
import sys
from pathlib import Path

PYENV_VERSIONS = Path("/root/.pyenv/versions")
ROOT = Path(__file__).resolve().parents[1]
# raydebug's source tree: another Python's PYTHONPATH, so that it runs this checkout's raydebug.
SOURCE = ROOT / "src"
# The other Pythons the tests run the agent on, each with pyenv's interpreters of it, newest
# last (empty when not installed: its tests skip). Lists, not glob()'s generators: a
# generator is empty for the second test that asks (the fallback then found pyenv's shim,
# which runs no version that is not selected).
PYTHONS = {version: sorted(PYENV_VERSIONS.glob(f"{version}.*/bin/python{version}"))
           for version in ("3.10", "3.12", "3.13")}
# Beside this venv, so `make clean` removes it and a CI run (a fresh clone) builds it once.
RAY_VENVS = ROOT / ".venv" / "pythons"


def find_python(version: str) -> Path | None:
    """The newest pyenv interpreter of ``version`` (``"3.12"``), or None."""
    found = sorted(PYENV_VERSIONS.glob(f"{version}.*/bin/python{version}"))
    return found[-1] if found else None


def interpreter(version: str) -> Path | None:
    """The newest pyenv interpreter of ``version``, else ``python{version}`` on PATH, else
    None."""
    found = find_python(version)
    if found is not None:
        return found
    on_path = shutil.which(f"python{version}")
    return Path(on_path) if on_path else None


def python_for(version: str) -> str:
    """A python to run a debugged process on ``version`` (``"3.12"``): this interpreter for
    its own version, else a venv of :func:`interpreter` with this venv's debugpy
    (:func:`venv_with_debugpy`; raydebug comes from :data:`SOURCE` through PYTHONPATH).
    Skips the calling test when that Python is not installed."""
    if version == f"{sys.version_info.major}.{sys.version_info.minor}":
        return sys.executable
    base = interpreter(version)
    if base is None:
        import pytest  # only tests ask for a Python they may do without

        pytest.skip(f"Python {version} is not installed")
    return venv_with_debugpy(base)


def pinned(*names: str) -> list[str]:
    """This venv's ``name==version`` lines (pip freeze) for ``names``, in that order."""
    frozen = subprocess.run([sys.executable, "-m", "pip", "freeze"], capture_output=True,
                            text=True, check=True).stdout.splitlines()
    by_name = {line.split("==")[0].lower(): line for line in frozen if "==" in line}
    return [by_name[name] for name in names if name in by_name]


def venv_with_debugpy(python: str | Path) -> str:
    """A venv of another interpreter with this venv's debugpy (raydebug comes from the source
    tree through PYTHONPATH); returns its python. Built once per interpreter under
    ``.venv/pythons`` (seconds: pip) and reused while the pins are the same."""
    version = subprocess.run([str(python), "-c", "import sys; print(sys.version.split()[0])"],
                             capture_output=True, text=True, check=True).stdout.strip()
    return _built_once(RAY_VENVS / f"debugpy-{version}", python, pinned("debugpy"))


def _built_once(directory: Path, base: str | Path, requirements: list[str],
                editable: bool = False) -> str:
    """The python of a venv of ``base`` at ``directory`` with ``requirements`` (and raydebug
    from the source tree, ``editable``). Built when missing or when its pins changed: the pins
    are written in the venv's ``.pins`` last, so a build cut short is built again. Concurrent
    callers (pytest-xdist's workers, a benchmark) wait on one lock file. Raises
    subprocess.CalledProcessError/TimeoutExpired when pip fails."""
    python = directory / "bin" / "python"
    source = [f"raydebug from {ROOT}"] if editable else []
    # The base by its real path: python3 and python3.12 are one interpreter, and a venv
    # built again (--clear) while tests run from it loses their debugpy under them.
    pins = "\n".join([*requirements, *source, str(Path(base).resolve())]) + "\n"
    stamp = directory / ".pins"
    directory.parent.mkdir(parents=True, exist_ok=True)
    with open(directory.parent / f".{directory.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if stamp.exists() and stamp.read_text() == pins and python.exists():
            return str(python)
        subprocess.run([str(base), "-m", "venv", "--clear", str(directory)], check=True,
                       timeout=120)
        subprocess.run([str(python), "-m", "pip", "install", "--quiet",
                        "--disable-pip-version-check", *requirements,
                        *(["-e", str(ROOT)] if editable else [])], check=True, timeout=1200)
        stamp.write_text(pins)
    return str(python)


def ray_venv(version: str = "3.12", directory: Path | None = None) -> str | None:
    """The python of a venv of pyenv's ``version`` with this venv's ``ray[default]`` and
    debugpy, and raydebug installed from the source tree (editable, with its startup ``.pth``,
    so Ray's workers, which run the driver's interpreter, link like this venv's). None when
    that Python is not installed, or this venv has no Ray.

    Built once (~45 s: Ray's wheel) and reused while the pins are the same: the pins
    are written in the venv's ``.pins`` last. Concurrent callers wait on one lock file.
    Raises subprocess.CalledProcessError/TimeoutExpired when pip fails.
    """
    base = find_python(version)
    if base is None:
        return None
    ray = [f"ray[default]=={line.split('==')[1]}" for line in pinned("ray")]
    if not ray:
        return None
    return _built_once(directory or RAY_VENVS / f"ray-{version}", base,
                       [*ray, *pinned("debugpy")], editable=True)


def debugpy_venvs() -> list[str]:
    """Build (or find) the venv :func:`python_for` gives each version of :data:`PYTHONS`
    that is installed; returns their pythons."""
    return [venv_with_debugpy(base) for version in PYTHONS
            if (base := interpreter(version)) is not None]


if __name__ == "__main__":
    # `python -m devtools.pythons [VERSION]`: build (or find) the Ray venv of VERSION;
    # `python -m devtools.pythons debugpy`: the debugpy venvs of the other Pythons.
    if sys.argv[1:2] == ["debugpy"]:
        print("\n".join(debugpy_venvs()) or "none installed")
    else:
        print(ray_venv(*sys.argv[1:2]) or "not installed")
