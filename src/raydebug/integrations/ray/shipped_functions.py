"""Functions Ray ships by value (defined in the driver's ``__main__``), handed to the armed
breakpoints of Python 3.10/3.11 as they are rebuilt in a worker
(:mod:`raydebug.agent.armed.shipped`).

Why this hook, and why it is safe. cloudpickle pickles a function it cannot import by name as
``ray.cloudpickle.cloudpickle._make_function(code, globals, name, argdefs, closure)`` plus
its state; unpickling looks that global up by name (``find_class``) each time, so replacing
the module attribute reaches every later unpickle, and only the unpickle of such functions
(never a task's arguments, never a call). Installed at the worker's setup, the wrapper calls
the real ``_make_function`` and then hands the new function over: kept in a weak set (a set
armed later must find it, and a scan of every object is not safe: see
:mod:`raydebug.agent.armed.live_code`), and while breakpoints are armed its ``__code__`` may
be swapped, nothing else (cloudpickle's state setter runs afterwards and never touches the
code). The wrapper keeps
the original's ``__module__`` and ``__qualname__``, so a function this worker pickles in turn
names ``_make_function`` as before. Functions imported by name (a working_dir module) arrive through
an import instead, which :mod:`raydebug.agent.armed.code` covers itself.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from types import FunctionType
from typing import Any

from ray.cloudpickle import cloudpickle

Adopt = Callable[[FunctionType], None]


def follow(adopt: Adopt | None) -> None:
    """Hand every function cloudpickle makes to ``adopt`` from now on; None: stop."""
    original = getattr(cloudpickle._make_function, "__wrapped__", cloudpickle._make_function)
    if adopt is None:
        cloudpickle._make_function = original
        return

    @functools.wraps(original)
    def _make_function(*args: Any, **kwargs: Any) -> Any:
        function = original(*args, **kwargs)
        if isinstance(function, FunctionType):
            adopt(function)
        return function

    cloudpickle._make_function = _make_function
