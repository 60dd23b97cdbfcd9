"""How much a snapshot may hold, and how often a process may take one.

The defaults keep a capture cheap (a 20-frame traceback with typical locals takes about a
millisecond: ``bench/snapshots.py``) and a snapshot small enough that a hub can keep a
thousand: each value's repr as ``raydebug stacks --locals`` caps it, containers and objects
expanded 3 levels deep and 100 items wide, at most about 900 kB of JSON. A process takes at most
:attr:`SnapshotLimits.burst` snapshots at once and then one per
:attr:`SnapshotLimits.refill_seconds` (:class:`RateLimit`): a loop that fails a thousand
tasks a second sends a few snapshots, not a thousand.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class SnapshotLimits:
    depth: int = 3  # levels of a container's or an object's parts below a local
    width: int = 100  # items (or attributes, or locals) kept of each
    repr_chars: int = 120  # a string's or an object's repr (reprlib's maxstring / maxother)
    max_bytes: int = 900_000  # the snapshot's JSON, about: values and file texts past it
    # are left out (the frames' places are always kept); under a control message's 1 MiB
    max_frames: int = 100  # innermost frames kept
    source_bytes: int = 256_000  # a file larger than this is sent without its text
    burst: int = 5  # snapshots a process may take at once...
    refill_seconds: float = 10.0  # ...and then one per this many seconds


DEFAULT_LIMITS = SnapshotLimits()


class RateLimit:
    """A token bucket: :meth:`allow` says whether one more snapshot may be taken now.

    Thread-safe (any thread of a process can fail at once). ``clock`` is a seam for tests."""

    def __init__(self, limits: SnapshotLimits = DEFAULT_LIMITS,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.limits = limits
        self._burst = float(limits.burst)
        self._refill = limits.refill_seconds
        self._clock = clock
        self._tokens = self._burst
        self._last = clock()
        self._lock = threading.Lock()
        self.refused = 0  # snapshots not taken: the rate was spent

    def allow(self) -> bool:
        with self._lock:
            now = self._clock()
            if self._refill > 0:
                self._tokens = min(self._burst,
                                   self._tokens + (now - self._last) / self._refill)
            self._last = now
            if self._tokens >= 1:
                self._tokens -= 1
                return True
            self.refused += 1
            return False
