"""How long ``raydebug attach`` waits before it says or gives up something, read once from
the environment (seconds) when set, else the default:

- ``RAYDEBUG_RUNNING_HINT_AFTER`` (5): the silence of a running command (``n``, ``c``...)
  after which it says "(running; Ctrl-C pauses it, q detaches)", once;
- ``RAYDEBUG_RECONNECT_FOR`` (15): how long ``--follow`` waits for a hub whose connection
  dropped to answer again, then for the session it dropped under to be listed there.

The tests that wait these out set them short (each is tested at its default elsewhere).
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping

from ..errors import ConfigurationError

RUNNING_HINT_AFTER_DEFAULT = 5.0
# A hub Ray restarts answers within seconds, and its processes link to it again within
# seconds more (their link's back-off tops out at 5 s).
RECONNECT_FOR_DEFAULT = 15.0


def seconds(environ: Mapping[str, str], variable: str, default: float) -> float:
    """The positive number of seconds ``variable`` says in ``environ``, ``default`` when it
    is unset or empty. Raises :class:`~raydebug.errors.ConfigurationError` for anything
    else (the command then says it in one line)."""
    text = environ.get(variable, "").strip()
    if not text:
        return default
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not (0 < value < math.inf):
        raise ConfigurationError(f"{variable}={text!r} is not a positive number of seconds")
    return value


RUNNING_HINT_AFTER = seconds(os.environ, "RAYDEBUG_RUNNING_HINT_AFTER",
                             RUNNING_HINT_AFTER_DEFAULT)
RECONNECT_FOR = seconds(os.environ, "RAYDEBUG_RECONNECT_FOR", RECONNECT_FOR_DEFAULT)
