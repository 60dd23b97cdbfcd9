"""``python -m raydebug`` and the ``raydebug`` console script (:func:`run`)."""

from __future__ import annotations

import sys


def run() -> None:
    """Run the command. Ctrl-C while it is still importing (click and the command's modules:
    ~0.1-0.3 s) leaves as quietly as one pressed later, with status 130, not with Python's
    traceback of the import it interrupted. A plain ``list --json`` is served before click
    is imported (see :mod:`raydebug.cli.list_json`)."""
    try:
        from .cli.list_json import serve_without_click

        if serve_without_click(sys.argv[1:]):
            return
        from .cli import main
    except KeyboardInterrupt:
        sys.exit(130)
    main()


if __name__ == "__main__":
    run()
