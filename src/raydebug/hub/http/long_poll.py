"""Long-polls: a listing that answers once what it shows has changed, or at a bound.

A listing's answer names, in its :data:`VERSION_HEADER` header, the version of the state it
shows (a number that grows with each change). A client that waits for a change asks again
with ``after=VERSION&timeout=S``: the hub answers once the state changed after that version,
or when ``S`` seconds (at most :data:`MAX_LONG_POLL`) have run out, with what there is then
(the client compares, and asks again with the new version). Without ``after``, or with
``timeout`` 0, it answers at once.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Protocol

from .exchange import Query

MAX_LONG_POLL = 300.0
VERSION_HEADER = "Raydebug-Version"


class Versioned(Protocol):
    """State a long-poll waits on: the registry (processes and sessions), the cluster's
    breakpoint set."""

    @property
    def version(self) -> int: ...

    async def wait_for_version_after(self, version: int) -> None:
        """Return once the state changed after ``version`` (at once if it already has)."""


@dataclass(frozen=True)
class LongPoll:
    """A request's ``after`` (None: the client waits for no change) and ``timeout``."""

    after: int | None
    timeout: float

    @classmethod
    def take(cls, query: Query) -> LongPoll:
        """``after`` and ``timeout`` taken out of ``query`` (what is left is the route's
        own); ``timeout`` is cut to :data:`MAX_LONG_POLL`. Raises ValueError when one is not
        a number."""
        after = query.pop("after", None)
        timeout = min(float(query.pop("timeout", "0")), MAX_LONG_POLL)
        return cls(None if after is None else int(after), timeout)

    async def wait(self, state: Versioned,
                   *until: Callable[[], Awaitable[None]]) -> tuple[str, str]:
        """Wait, at most ``timeout`` seconds in all, until ``state`` changed after
        ``after`` (when given) and each of ``until`` returned; then the header naming the
        version of ``state`` now. Running out of time is not an error: the caller answers
        with what there is. Cancelling it cancels the wait."""
        after = self.after
        waits = ([lambda: state.wait_for_version_after(after)]
                 if after is not None else []) + list(until)
        if waits and self.timeout > 0:
            async def all_waits() -> None:
                for wait in waits:
                    await wait()

            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(all_waits(), self.timeout)
        return VERSION_HEADER, str(state.version)
