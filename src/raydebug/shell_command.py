"""How a hint names the ``raydebug`` command, so that it works pasted into this shell."""

from __future__ import annotations

import os
import shutil
import sys


def raydebug_command() -> str:
    """``raydebug`` when the shell finds it on PATH; else this interpreter's own console
    script (``.venv/bin/raydebug`` in a checkout that ``make demo`` set up, relative to the
    current directory when it is under it); else ``python -m raydebug`` with this
    interpreter. Never raises."""
    if shutil.which("raydebug"):
        return "raydebug"
    beside = os.path.join(os.path.dirname(sys.executable), "raydebug")
    if os.access(beside, os.X_OK):
        return _as_typed(beside)
    return f"{_as_typed(sys.executable)} -m raydebug"


def _as_typed(path: str) -> str:
    """``path`` as short as it works: relative (with a slash, so the shell runs that file)
    under the current directory, else absolute."""
    try:
        relative = os.path.relpath(path)
    except ValueError:  # another drive (Windows)
        return path
    if relative.startswith(os.pardir):
        return path
    return relative if os.sep in relative else os.path.join(os.curdir, relative)
