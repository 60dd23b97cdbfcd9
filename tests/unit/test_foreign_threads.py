"""A thread started outside the ``threading`` module (as Ray's C++ pool runs a threaded
actor's methods) is one a pause can ask: ``register_foreign_threads`` gives it a record."""

from __future__ import annotations

import _thread
import sys
import threading

import pytest

from raydebug.agent.debugger.thread_tracing import register_foreign_threads


@pytest.mark.skipif(sys.version_info >= (3, 12), reason="pydevd's start did it on <= 3.11")
def test_a_thread_started_in_c_gets_a_threading_record() -> None:
    started, gate = threading.Event(), threading.Event()
    idents: list[int] = []

    def blocked() -> None:  # no threading.current_thread() here: unknown to threading
        idents.append(_thread.get_ident())
        started.set()
        gate.wait(30)

    _thread.start_new_thread(blocked, ())
    try:
        assert started.wait(10)
        (ident,) = idents
        assert ident not in {t.ident for t in threading.enumerate()}
        assert ident in register_foreign_threads()
        (known,) = [t for t in threading.enumerate() if t.ident == ident]
        assert type(known).__name__ == "_DummyThread"
        assert ident not in register_foreign_threads()  # once
        assert threading.get_ident() in threading._active  # type: ignore[attr-defined]
    finally:
        gate.set()
