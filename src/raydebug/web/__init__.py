"""The web page's files: plain HTML, CSS and ES modules in ``static/``, shipped in the wheel
and served by the hub as they are (no build step, nothing fetched from elsewhere: clusters
are often offline).

``/`` is ``static/index.html``; every other file of ``static/`` is served at ``/<name>``, and
the icon also at ``/favicon.ico`` (:data:`ALIASES`).
"""

from __future__ import annotations

import functools
from importlib import resources

_TYPES = {".html": "text/html; charset=utf-8", ".js": "text/javascript; charset=utf-8",
          ".css": "text/css; charset=utf-8", ".svg": "image/svg+xml",
          ".png": "image/png", ".ico": "image/x-icon"}
# Paths that serve another page file: a browser asks for /favicon.ico without being told
# (and accepts an SVG there).
ALIASES = {"/favicon.ico": "/favicon.svg"}


@functools.lru_cache(maxsize=1)
def _files() -> dict[str, tuple[bytes, str]]:
    """Every page file by the path it is served at: (bytes, content type)."""
    found: dict[str, tuple[bytes, str]] = {}
    for entry in resources.files(__package__).joinpath("static").iterdir():
        suffix = "." + entry.name.rpartition(".")[2]
        if entry.is_file() and suffix in _TYPES:
            path = "/" if entry.name == "index.html" else "/" + entry.name
            found[path] = (entry.read_bytes(), _TYPES[suffix])
    found.update({alias: found[path] for alias, path in ALIASES.items() if path in found})
    return found


def page_files() -> list[str]:
    """The paths the page's files are served at."""
    return sorted(_files())


def is_page_file(path: str) -> bool:
    """Whether ``path`` is one of the page's own files (public: they hold no secret)."""
    return path in _files()


def page_file(path: str) -> tuple[bytes, str]:
    """The bytes and content type served at ``path``; KeyError when it is not a page file."""
    return _files()[path]
