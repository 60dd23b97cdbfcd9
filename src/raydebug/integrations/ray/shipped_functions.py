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

A worker that ``raydebug link`` reached had no setup hook: what Ray rebuilt before the link
is found in Ray's own tables instead (:func:`made_before`).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from types import FunctionType
from typing import Any

import ray
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


def made_before() -> list[FunctionType]:
    """The functions this worker's Ray holds already, for a worker linked while it ran (no
    setup hook followed its unpickling): each remote function it loaded, and the functions
    of each actor class it loaded (a class's ``__dict__``: an actor's methods are called
    through Ray's executors, which close over these). Read from Ray's function manager
    (``ray._private``: names checked, so another Ray version finds fewer, never fails)."""
    manager = getattr(ray._private.worker.global_worker, "function_actor_manager", None)
    infos = dict(getattr(manager, "_function_execution_info", None) or {})
    classes = dict(getattr(manager, "_loaded_actor_classes", None) or {})
    found = [getattr(info, "function", None) for info in infos.values()]
    for actor_class in classes.values():
        for klass in getattr(actor_class, "__mro__", ()):
            # staticmethod and classmethod hold theirs as __func__; a property as fget
            found.extend(getattr(value, "__func__", getattr(value, "fget", value))
                         for value in list(vars(klass).values()))
    functions = {}
    for function in found:
        while isinstance(function, FunctionType) and id(function) not in functions:
            functions[id(function)] = function
            function = getattr(function, "__wrapped__", None)  # a decorator's original
    return list(functions.values())
