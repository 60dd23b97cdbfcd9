"""Imports that a fork must not split in two.

A module being imported holds its module lock until it is whole. A fork in the middle leaves
the child a half-imported module and a lock held by a thread the child does not have: the
child's own link thread then waits on it forever, or finds the module half made ("unknown
encoding: idna"). The link thread imports the agent, the arm, the stack reader, TLS and the
Ray integration's hub lookup when it first needs them, while the process's own threads may
fork (multiprocessing, DataLoader workers, ``subprocess``). So those imports run inside
:func:`importing`, and a fork waits for the ones in flight and keeps new ones from starting
until it is done (at-fork hooks: milliseconds, and only when one is in flight), bounded by
:data:`FORK_WAITS_FOR_IMPORTS` so that a stuck import cannot stop a fork for good.
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Iterator

FORK_WAITS_FOR_IMPORTS = 5.0  # seconds

_changed = threading.Condition()
_in_flight: dict[int, int] = {}  # thread ident -> how deep it is inside importing()


@contextlib.contextmanager
def importing() -> Iterator[None]:
    """Around imports that a fork must wait for; nests, from any thread."""
    me = threading.get_ident()
    with _changed:
        _in_flight[me] = _in_flight.get(me, 0) + 1
    try:
        yield
    finally:
        with _changed:
            depth = _in_flight.pop(me, 1) - 1
            if depth:
                _in_flight[me] = depth
            _changed.notify_all()


def hold_for_fork(timeout: float = FORK_WAITS_FOR_IMPORTS) -> None:
    """Before a fork: wait until no other thread imports inside :func:`importing` (the
    forking thread's own import is not split by its fork), at most ``timeout``, then keep
    any from starting until :func:`release_after_fork`."""
    me = threading.get_ident()
    _changed.acquire()
    _changed.wait_for(lambda: not set(_in_flight) - {me}, timeout)


def release_after_fork(in_child: bool) -> None:
    """After a fork, in the parent or the child (whose other threads, and their imports in
    flight, are not there: its one thread is the one that forked)."""
    global _changed
    if in_child:
        me = threading.get_ident()
        for ident in [ident for ident in _in_flight if ident != me]:
            del _in_flight[ident]
        _changed = threading.Condition()
    else:
        _changed.release()


os.register_at_fork(before=hold_for_fork, after_in_parent=lambda: release_after_fork(False),
                    after_in_child=lambda: release_after_fork(True))
