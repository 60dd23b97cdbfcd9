"""The hub's questions to live processes: stacks, what they run now, and pauses.

Theory of operation. A question goes to each selected process on its control connection
(``CollectStacks``, ``Pause``) with a request id; the agent's link thread answers on the
same connection (``Stacks``, ``Paused``) and :meth:`ProcessQueries.answer` resolves the
waiting future. Every fan-out waits for all answers *in parallel*, under one timeout: a
process that does not answer in time (its GIL held by C code, its link gone) is listed as
not answering, with the reason, and never delays the others beyond it. Late answers find no
future and are dropped. Nothing here changes state: a pause's sessions arrive as
``SessionStarted``, through the registry, like any other.

What Ray processes run now, for a listing, is asked differently, since a listing of 10,000
must not wait for the slowest of them nor pile questions on them: one *round* asks, with one
request id and one encoded message written to every process that has no question of an
earlier round still unanswered, and waits for the answers under a short bound
(:data:`ACTIVITY_TIMEOUT`). A process that misses it is listed with its last answer, marked
``activity_stale``; its answer, when it comes, still updates what the next listing shows.
"""

from __future__ import annotations

import asyncio
import itertools
from typing import Any

from ..errors import NoProcessMatchError
from ..protocol.control import (
    CancelPause,
    CollectStacks,
    ControlMessage,
    Pause,
    PauseCancelled,
    Paused,
    Resume,
    Resumed,
    Stacks,
    encode_control,
)
from ..selectors import Selector
from ..session import ProcessState
from ..views_processes import brief_process
from .entries import Process
from .registry import Registry

DEFAULT_TIMEOUT = 2.0
# A process's first pause starts pydevd before it answers: well within a second on an idle
# machine, seconds on a loaded one (measured: docs/design.md#pause-request).
PAUSE_TIMEOUT = 10.0
ACTIVITY_TIMEOUT = 0.1  # for what Ray processes run now, in a listing (then: last answers)
MIN_ACTIVITY_WAIT = 0.03  # of it, left to read answers however long asking took
ASK_CHUNK = 256  # listing questions written per loop turn (the answers are read between)
REASK_AFTER = 5.0  # seconds: a listing question unanswered this long is asked again
MAX_TIMEOUT = 30.0
KNOWN_SHOWN = 20  # processes named in a "matches nothing" answer
ATTACHED = "a client is attached to its process (continue it there)"


class ProcessQueries:
    """Questions in flight, by request id. One per hub."""

    def __init__(self, registry: Registry) -> None:
        self._registry = registry
        self._ids = itertools.count(1)
        # request id -> who was asked, and the future its answer resolves
        self._waiting: dict[int, tuple[Process, asyncio.Future[ControlMessage]]] = {}
        # listing rounds: request id -> the processes asked that have not answered yet
        self._rounds: dict[int, _Round] = {}
        # process -> (round id, when) of its unanswered listing question
        self._asked: dict[Process, tuple[int, float]] = {}
        # The latest listing round: seconds spent writing its questions, how many it asked
        # (Server-Timing).
        self.last_round_writing = 0.0
        self.last_round_asked = 0

    def answer(self, process: Process,
               message: Stacks | Paused | PauseCancelled | Resumed) -> None:
        """``process``'s answer; nothing when its question timed out already (or was not
        asked of that process)."""
        round_ = self._rounds.get(message.request_id)
        if round_ is not None and isinstance(message, Stacks):
            round_.answered(process, message)
            if self._asked.get(process, (0, 0.0))[0] == message.request_id:
                del self._asked[process]
            if round_.all_answered.done():
                del self._rounds[message.request_id]
            return
        asked = self._waiting.get(message.request_id)
        if asked is None or asked[0] is not process:
            return
        del self._waiting[message.request_id]
        if not asked[1].done():
            asked[1].set_result(message)

    def lost(self, process: Process) -> None:
        """``process``'s connection closed: its questions get no answer."""
        for asked, future in list(self._waiting.values()):
            if asked is process and not future.done():
                future.set_exception(LookupError("its connection closed"))
        round_id, _ = self._asked.pop(process, (0, 0.0))
        round_ = self._rounds.get(round_id)
        if round_ is not None:
            round_.forget(process)
            if round_.all_answered.done():
                del self._rounds[round_id]

    # -- fan-outs -----------------------------------------------------------------------------

    async def select(self, selector: Selector, *, activity: bool = True) -> list[Process]:
        """The connected processes ``selector`` matches. Terms on what a process runs now
        (``task=``, ``actor=``) ask the Ray processes first (``activity``)."""
        processes = self._registry.all_processes()
        if activity and selector.needs_activity:
            await self.refresh_activity(processes, everyone=True)
        if not selector.terms:
            return processes
        return [p for p in processes if selector.matches(self._registry.process_view(p))]

    def no_match(self, selector: Selector) -> NoProcessMatchError:
        views = self._registry.processes()
        known = [brief_process(view) for view in views[:KNOWN_SHOWN]]
        if len(views) > KNOWN_SHOWN:
            known.append(f"... and {len(views) - KNOWN_SHOWN} more")
        return NoProcessMatchError(f"no process matches {selector.text}", known)

    async def refresh_activity(self, processes: list[Process],
                               timeout: float = ACTIVITY_TIMEOUT, *,
                               everyone: bool = False) -> None:
        """Ask the live Ray processes among ``processes`` what they run now (the answer
        lands in ``Process.now``), within ``timeout``: those that answer later, or that
        were not asked in it, keep their earlier answer, with ``Process.now_stale``.

        The questions go out :data:`ASK_CHUNK` at a time, the loop reading the answers
        that came in between, those asked longest ago first; asking stops when the bound
        leaves only :data:`MIN_ACTIVITY_WAIT` to read answers (writing 10,000 questions
        takes longer than the whole bound on a loaded machine), so the next listing asks
        the rest first. ``everyone``: ask each process, however long it takes (a selector
        on what they run now must not pick by old answers)."""
        loop = asyncio.get_running_loop()
        started = loop.time()
        timeout = min(max(timeout, 0.0), MAX_TIMEOUT)
        stop_asking = started + max(timeout - MIN_ACTIVITY_WAIT, 0.0)
        round_id = next(self._ids)
        message = encode_control(CollectStacks(request_id=round_id, frames=False))
        candidates = []
        for process in processes:
            if process.state is ProcessState.GONE or not process.reported("worker_id"):
                continue
            process.now_stale = True
            candidates.append(process)
        candidates.sort(key=_asked_at)
        this = self._rounds[round_id] = _Round(loop.create_future())
        rounds = {round_id}
        writing = 0.0
        for start in range(0, len(candidates), ASK_CHUNK):
            now = loop.time()
            if start and not everyone and now >= stop_asking:
                break
            for process in candidates[start:start + ASK_CHUNK]:
                earlier, when = self._asked.get(process, (0, 0.0))
                if earlier in self._rounds and now - when < REASK_AFTER:
                    rounds.add(earlier)  # asked already: wait for that answer, ask no more
                    continue
                self._asked[process] = (round_id, now)
                process.asked_at = now
                this.pending.add(process)
                this.asked += 1
                process.send(message)
            writing += loop.time() - now
            await asyncio.sleep(0)  # read the answers that came meanwhile
        self.last_round_writing, self.last_round_asked = writing, this.asked
        this.close()
        if not this.pending:
            del self._rounds[round_id]
        done = [self._rounds[r].all_answered for r in rounds if r in self._rounds]
        if done:
            wait = max(started + timeout - loop.time(), min(timeout, MIN_ACTIVITY_WAIT))
            await asyncio.wait(done, timeout=wait)

    async def stacks(self, processes: list[Process], with_locals: bool,
                     timeout: float = DEFAULT_TIMEOUT) -> list[dict[str, Any]]:
        """Every thread's stack in each of ``processes`` (the shape of ``GET /api/stacks``'s
        ``processes``), in the order given."""
        answers = await self._ask_all(
            processes, lambda rid: CollectStacks(request_id=rid, locals=with_locals), timeout)
        result = []
        for process, answer in zip(processes, answers, strict=True):
            entry: dict[str, Any] = {"process": self._registry.process_view(process)}
            if isinstance(answer, Stacks):
                entry.update(answered=True, reason=None, threads=answer.threads)
            else:
                entry.update(answered=False, reason=answer, threads=[])
            result.append(entry)
        return result

    async def pause(self, processes: list[Process], timeout: float = PAUSE_TIMEOUT,
                    expire: float = 0.0) -> dict[str, Any]:
        """Ask each running process among ``processes`` to pause; paused ones are left as
        they are. A thread that has not stopped within ``expire`` seconds is no longer
        asked (0: until it stops or :meth:`cancel_pauses`). Returns ``{"paused",
        "already_paused", "failed"}`` (ids; ``failed``: id -> reason). The sessions follow
        on their own."""
        running = [p for p in processes if p.state is ProcessState.RUNNING]
        already = [p.id for p in processes if p.state is not ProcessState.RUNNING]
        expire_ms = max(0, round(expire * 1000))
        answers = await self._ask_all(
            running, lambda rid: Pause(request_id=rid, expire_ms=expire_ms), timeout)
        paused, failed = [], {}
        for process, answer in zip(running, answers, strict=True):
            if isinstance(answer, Paused) and not answer.error:
                paused.append(process.id)
            elif isinstance(answer, Paused) or process.state is ProcessState.GONE:
                failed[process.id] = answer.error if isinstance(answer, Paused) else answer
            else:
                failed[process.id] = f"{answer}{self._settle_unanswered_pause(process, expire)}"
        return {"paused": paused, "already_paused": already, "failed": failed}

    @staticmethod
    def _settle_unanswered_pause(process: Process, expire: float) -> str:
        """Decide what becomes of a pause ``process`` did not answer in time (its link thread
        did not run: its GIL held by C code, or the process stopped); return it in words,
        said after the reason.
        The request waits in its connection: read when the process runs again, it would
        pause a process its asker was told it could not pause, and a paused process no
        client comes to waits for ever. So a bounded request (``expire``) is withdrawn
        behind it, which the agent, reading both together, heeds before carrying out the
        pause (:meth:`~raydebug.agent.link.dispatch.ControlDispatch.handle_read`); one
        asked to be kept (``--keep``, no ``expire``) stays, as asked."""
        if expire > 0:
            process.send(CancelPause(request_id=0))  # no answer awaited: 0 is never asked
            return "; withdrawn: it will not pause when it runs again"
        return ("; still asked (--keep): it pauses when it runs Python again (`raydebug "
                "pause --cancel` withdraws)")

    async def cancel_pauses(self, processes: list[Process],
                            timeout: float = DEFAULT_TIMEOUT) -> dict[str, Any]:
        """Withdraw the pauses asked of ``processes`` that no thread has met yet. Returns
        ``{"cancelled": {id: threads withdrawn}, "failed": {id: reason}}``."""
        answers = await self._ask_all(processes, lambda rid: CancelPause(request_id=rid),
                                      timeout)
        cancelled, failed = {}, {}
        for process, answer in zip(processes, answers, strict=True):
            if isinstance(answer, PauseCancelled):
                cancelled[process.id] = answer.threads
            else:
                failed[process.id] = str(answer)
        return {"cancelled": cancelled, "failed": failed}

    async def resume(self, processes: list[Process],
                     timeout: float = DEFAULT_TIMEOUT) -> dict[str, Any]:
        """``raydebug continue``: every paused thread of each of ``processes`` runs on; a
        process a client is attached to is left to that client. Returns ``{"resumed":
        [session], "not_resumed": [session with its "reason"]}``, each session's record
        as listed when asked (``GET /api/sessions``' shape); a session that ended meanwhile
        or whose process is gone is in ``not_resumed``, and the others are resumed all the
        same. Running processes are not in the answer."""
        paused = [p for p in processes if p.sessions]
        listed = {p: [s.to_dict() for s in p.sessions.values()] for p in paused}
        asked = [p for p in paused if p.client is None]
        answers = await self._ask_all(asked, lambda rid: Resume(request_id=rid), timeout)
        why = {p: ATTACHED for p in paused if p.client is not None}
        resumed: list[dict[str, Any]] = []
        for process, answer in zip(asked, answers, strict=True):
            if isinstance(answer, Resumed) and not answer.error:
                ended = set(answer.sessions)
                resumed += [s for s in listed[process] if s["id"] in ended]
                why[process] = "it ended meanwhile"
            else:
                why[process] = answer.error if isinstance(answer, Resumed) else str(answer)
        taken = {s["id"] for s in resumed}
        not_resumed = [{**s, "reason": why[p]} for p in paused for s in listed[p]
                       if s["id"] not in taken]
        return {"resumed": resumed, "not_resumed": not_resumed}

    async def _ask_all(self, processes: list[Process], question: Any,
                       timeout: float) -> list[ControlMessage | str]:
        """Send ``question(request_id)`` to each process; their answers, or for each that
        gave none the reason, in order. One timeout for all."""
        loop = asyncio.get_running_loop()
        futures: list[asyncio.Future[ControlMessage]] = []
        ids = []
        for process in processes:
            request_id = next(self._ids)
            future: asyncio.Future[ControlMessage] = loop.create_future()
            self._waiting[request_id] = (process, future)
            futures.append(future)
            ids.append(request_id)
            if process.state is ProcessState.GONE:
                future.set_exception(LookupError("its connection closed"))
            else:
                process.send(question(request_id))
        if futures:
            await asyncio.wait(futures, timeout=min(max(timeout, 0.0), MAX_TIMEOUT))
        results: list[ControlMessage | str] = []
        for process, request_id, future in zip(processes, ids, futures, strict=True):
            self._waiting.pop(request_id, None)
            if not future.done():
                future.cancel()
                results.append(f"no answer within {timeout:g}s (is its GIL held by C code?)")
            elif future.exception() is not None:
                results.append(str(future.exception()))
            else:
                answer = future.result()
                if isinstance(answer, Stacks):
                    process.now = dict(answer.now)
                    process.now_stale = False
                results.append(answer)
        return results


class _Round:
    """One listing question: the processes that have not answered it yet. It is answered
    once none is left and it is closed (no more are being asked)."""

    def __init__(self, all_answered: asyncio.Future[None]) -> None:
        self.pending: set[Process] = set()
        self.all_answered = all_answered
        self.asked = 0
        self._asking = True

    def answered(self, process: Process, message: Stacks) -> None:
        if process in self.pending:
            process.now = dict(message.now)
            process.now_stale = False
            self.forget(process)

    def forget(self, process: Process) -> None:
        self.pending.discard(process)
        self._check()

    def close(self) -> None:
        """Every question of the round is out."""
        self._asking = False
        self._check()

    def _check(self) -> None:
        if not self.pending and not self._asking and not self.all_answered.done():
            self.all_answered.set_result(None)


def _asked_at(process: Process) -> float:
    return process.asked_at


