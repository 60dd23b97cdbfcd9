"""A package's names imported from its modules at first use (a module ``__getattr__``).

A package that re-exports its modules' names would import every module with itself. Some are
on the way into every process: a Ray worker's setup hook is named
``raydebug.integrations.ray.setup_worker``, and an agent's link imports ``raydebug.protocol``
for its control messages only. With :func:`importer` each name comes from its module when it
is first asked for, and is then kept in the package.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any


def importer(package: str, homes: dict[str, str],
             namespace: dict[str, Any]) -> Callable[[str], Any]:
    """The ``__getattr__`` of ``package``: ``homes`` maps a name to its module's name in the
    package; ``namespace`` is the package's ``globals()``, where each name is kept."""

    def __getattr__(name: str) -> Any:
        home = homes.get(name)
        if home is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(f"{package}.{home}"), name)
        namespace[name] = value
        return value

    return __getattr__
