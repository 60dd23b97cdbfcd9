"""The IDE's ``raised`` exception filter, armed without pydevd: which raises stop.

Theory of operation. While the cluster's set has the ``raised`` filter, a backend reports
each exception raised in a frame: on Python >= 3.12 ``sys.monitoring``'s ``RAISE`` event (a
global event: it cannot be turned on for some code only, nor disabled where it fired), on
3.10/3.11 the ``exception`` event of a local trace function. Both report an exception again
in every caller it propagates into, and in library code as well, so :func:`stops_here` keeps
one report per raise: the one in the first frame of the user's code that the exception
reaches (where it was raised, or where a library's exception came out into the user's
code), as pydevd's "raised exceptions" with ``justMyCode``. Library code is the standard
library, site-packages, raydebug's and debugpy's own, and code with no file (``<string>``,
``<frozen ...>``). ``StopIteration``, ``StopAsyncIteration`` and ``GeneratorExit`` are
control flow, never stopped at.

The cost of the filter while it is set is one call per raise, anywhere (docs/design.md#armed):
a dict lookup for library code, the walk of a short traceback for the user's.
"""

from __future__ import annotations

import os
import site
import sysconfig
from types import FrameType, TracebackType

_CONTROL_FLOW = (StopIteration, StopAsyncIteration, GeneratorExit)


def _library_roots() -> tuple[str, ...]:
    paths = sysconfig.get_paths()
    roots = {paths[name] for name in ("stdlib", "platstdlib", "purelib", "platlib")
             if name in paths}
    roots.update(getattr(site, "getsitepackages", list)())
    roots.add(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # raydebug
    return tuple(sorted(os.path.join(os.path.realpath(root), "") for root in roots))


_ROOTS = _library_roots()
_is_library_cache: dict[str, bool] = {}


def is_library(filename: str) -> bool:
    """Whether code of ``filename`` is a library's (see the module docstring); cached."""
    known = _is_library_cache.get(filename)
    if known is None:
        known = filename.startswith("<") or os.path.realpath(filename).startswith(_ROOTS)
        _is_library_cache[filename] = known
    return known


def stops_here(frame: FrameType, exception: BaseException,
               traceback: TracebackType | None) -> bool:
    """Whether a raise of ``exception`` reported in ``frame`` stops there: ``traceback`` is
    the exception's traceback at the report, whose first entry is ``frame`` and whose later
    ones are the frames it came out of."""
    if is_library(frame.f_code.co_filename) or isinstance(exception, _CONTROL_FLOW):
        return False
    entry = traceback.tb_next if traceback is not None and traceback.tb_frame is frame else None
    while entry is not None:
        if not is_library(entry.tb_frame.f_code.co_filename):
            return False  # reported (and stopped at) in the user's frame it came from
        entry = entry.tb_next
    return True

