"""Other Pythons for tests and benchmarks: pyenv's interpreters, each in a venv with this
venv's debugpy (raydebug itself comes from the source tree through PYTHONPATH)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

PYENV_VERSIONS = Path("/root/.pyenv/versions")


def find_python(version: str) -> Path | None:
    """The newest pyenv interpreter of ``version`` (``"3.12"``), or None."""
    found = sorted(PYENV_VERSIONS.glob(f"{version}.*/bin/python{version}"))
    return found[-1] if found else None


def venv_with_debugpy(python: str | Path, directory: Path) -> str:
    """A venv of another interpreter at ``directory`` with this venv's debugpy (raydebug comes
    from the source tree through PYTHONPATH); returns its python."""
    subprocess.run([str(python), "-m", "venv", str(directory)], check=True, timeout=120)
    debugpy = [line for line in subprocess.run(
        [sys.executable, "-m", "pip", "freeze"], capture_output=True, text=True,
        check=True).stdout.splitlines() if line.lower().startswith("debugpy==")]
    subprocess.run([str(directory / "bin" / "python"), "-m", "pip", "install", "--quiet",
                    "--disable-pip-version-check", *debugpy], check=True, timeout=240)
    return str(directory / "bin" / "python")
