"""The ``raydebug`` command. Each command parses its options, calls the code that does the
work, and hands plain data to :mod:`raydebug.views` to render.

Commands by module: ``hub_command`` (hub), ``run_command`` (run),
``sessions`` (list, attach, snapshots), ``vscode_command`` (vscode), ``live_commands`` (ps, stacks,
pause, continue), ``breakpoints`` (break, logs), ``web_command`` (web), ``tunnel_command``
(tunnel, hub-address), ``link_command`` (link).
Shared: ``locate`` (which hub), ``options`` (common options), ``output`` (errors and
colour), ``help_format`` (``--help``'s examples laid out for a narrow terminal).
``group`` is the click group and :func:`main`; ``list_json`` prints ``list --json``, and
serves a plain ``raydebug list --json --hub HOST:PORT`` before click is imported (scripts
and editors run it often, and click is a third of its time: docs/design.md#per-step-costs).
This package imports neither click nor its modules: ``cli`` and ``main`` come from
``group`` at first use.

A :class:`~raydebug.errors.RaydebugError` becomes one red line on stderr and exit status 1.
"""

from __future__ import annotations

from ..lazy_names import importer

__all__ = ["cli", "main"]
__getattr__ = importer(__name__, {"cli": "group", "main": "group", "COMMANDS": "group"},
                       globals())
