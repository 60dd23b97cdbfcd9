"""The code of some files that is live in this process (Python 3.10/3.11; what :mod:`.code`
swaps rewritten code into): their functions, the frames of their suspended generators, and
their source as the process loaded it.

Theory of operation. :func:`scan` finds a file's functions without a walk of every object:
every function of a file has its module's namespace as ``__globals__``, so the referrers of
those namespaces are its functions (closures made since included), and the referrers of their
code objects are its generators. Functions rebuilt from shipped code (:mod:`.shipped`) bring
their own namespaces, and are kept there.

Why not ``gc.get_objects()``: its list holds a reference to every object, tuples that another
thread is still filling among them (``tuple(generator)`` resizes its tuple, which needs a
reference count of 1), and while the list lives the GIL may pass to that thread: its
``tuple()`` then fails with "SystemError: Objects/tupleobject.c: bad argument to internal
function". Neither a function nor a generator can be a tuple in the making.
"""

from __future__ import annotations

import gc
import linecache
import os
import sys
from collections.abc import Iterable
from types import (
    AsyncGeneratorType,
    CodeType,
    CoroutineType,
    FrameType,
    FunctionType,
    GeneratorType,
)
from typing import Any

from . import shipped


def source_of(filename: str) -> str | None:
    """The source of ``filename`` as ``linecache`` has it, or None when it has none."""
    lines = linecache.getlines(filename)
    return "".join(lines) if lines else None


_GENERATORS = {GeneratorType: "gi_frame", CoroutineType: "cr_frame",
               AsyncGeneratorType: "ag_frame"}


def scan(files: frozenset[str], known_codes: Iterable[CodeType] = ()
         ) -> tuple[list[FunctionType], list[FrameType]]:
    """The live functions of ``files``, and the frames of their suspended generators (also
    those running one of ``known_codes``: code we swapped out or in). Never fails for another
    thread's objects (see the module docstring)."""
    if not files:
        return [], []
    rebuilt = [f for f in list(shipped.functions) if f.__code__.co_filename in files]
    namespaces = {id(f.__globals__): f.__globals__ for f in rebuilt}
    for module in list(sys.modules.values()):
        namespace = getattr(module, "__dict__", None)
        if isinstance(namespace, dict) and _defined_in(namespace, files):
            namespaces[id(namespace)] = namespace
    found = {id(f): f for f in rebuilt}
    for referrer in gc.get_referrers(*namespaces.values()):
        if type(referrer) is FunctionType and referrer.__code__.co_filename in files:
            found[id(referrer)] = referrer
    functions = list(found.values())
    codes = {id(code): code for f in functions for code in _codes_of(f.__code__)}
    codes.update((id(code), code) for code in known_codes)  # what a generator may still run
    suspended = []
    for referrer in gc.get_referrers(*codes.values()):
        kind = type(referrer)
        if kind in _GENERATORS:
            frame = getattr(referrer, _GENERATORS[kind])
            if frame is not None and frame.f_code.co_filename in files:
                suspended.append(frame)
    return functions, suspended


def _defined_in(namespace: dict[str, Any], files: frozenset[str]) -> bool:
    """Whether ``namespace`` is the module namespace of one of ``files``."""
    path = namespace.get("__file__")
    if isinstance(path, str) and (path in files or os.path.abspath(path) in files):
        return True
    spec = namespace.get("__spec__")
    return getattr(spec, "origin", None) in files


def _codes_of(code: CodeType) -> list[CodeType]:
    """``code`` and every code object nested in its constants."""
    codes = [code]
    for constant in code.co_consts:
        if isinstance(constant, CodeType):
            codes.extend(_codes_of(constant))
    return codes
