"""On/off environment variables, read one way: ``1``, ``true``, ``yes`` or ``on``, in any
case, is on. A module of its own, with no imports: a Ray worker's setup hook and the startup
``.pth`` read flags before anything else of raydebug is imported."""

from __future__ import annotations

TRUTHY = frozenset({"1", "true", "yes", "on"})


def is_on(value: str | None) -> bool:
    """Whether an environment variable's value (None: unset) turns its flag on."""
    return (value or "").strip().lower() in TRUTHY
