"""Functions an integration rebuilt from shipped code (Ray's cloudpickle: a function of the
driver's ``__main__``), kept weakly for the 3.10/3.11 arm (:mod:`.code`): no module
namespace leads to them, so a set armed later finds them here (:func:`.live_code.scan`).

Small on purpose: imported at every Ray worker's start (on 3.10/3.11), where importing
:mod:`.code` (``ast`` and the rest: docs/design.md#armed) would be paid by Ray workers that
never see a breakpoint. A function made once a set is armed is handed to :mod:`.code` at once.
"""

from __future__ import annotations

import sys
import weakref
from types import FunctionType

functions: weakref.WeakSet[FunctionType] = weakref.WeakSet()


def made(function: FunctionType) -> None:
    """An integration made ``function``: keep it, and arm it if a set is armed already."""
    functions.add(function)
    rewriting = sys.modules.get(__name__.rpartition(".")[0] + ".code")
    if rewriting is not None:  # imported: some set was armed in this process
        rewriting.adopt_shipped(function)
