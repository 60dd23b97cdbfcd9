"""The 3.10/3.11 arm's search for the functions of a file, next to threads that build tuples.

``tuple(generator)`` resizes the tuple it fills, which CPython allows only while nothing
else refers to it; a search through ``gc.get_objects()`` held a reference to every object,
and a thread that got the GIL meanwhile failed with ``SystemError`` (seen in a Ray worker).
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Iterator

from raydebug.agent.armed.live_code import scan


def counted(n: int) -> Iterator[int]:
    for i in range(n):
        _ = [i] * 3  # Python code between items: the GIL may pass here
        yield i


def make_closure() -> object:
    def inner() -> int:
        return 1
    return inner


def test_the_search_finds_functions_closures_and_generators_of_a_file():
    closure, generator = make_closure(), counted(3)
    next(generator)
    functions, suspended = scan(frozenset({__file__}))
    assert {counted, make_closure, closure} <= set(functions)
    assert generator.gi_frame in suspended
    assert all(f.__code__.co_filename == __file__ for f in functions)


def test_the_search_never_breaks_a_tuple_another_thread_is_building():
    errors: list[BaseException] = []
    stop = threading.Event()

    def build() -> None:
        while not stop.is_set():
            try:
                tuple(counted(50))
            except SystemError as error:
                errors.append(error)
                return

    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # hand the GIL over as often as CPython can
    builder = threading.Thread(target=build, daemon=True)
    builder.start()
    try:
        deadline = time.monotonic() + 3
        while time.monotonic() < deadline and not errors:
            scan(frozenset({__file__}))
    finally:
        stop.set()
        builder.join(10)
        sys.setswitchinterval(interval)
    assert not errors, errors
