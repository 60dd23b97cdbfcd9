"""One line breakpoint: the client's DAP ``SourceBreakpoint``, and what it evaluates when its
line runs (its ``condition``, its ``hitCondition``, a logpoint's ``logMessage``).

A logpoint whose ``logMessage`` is ``SNAPSHOT_POINT_MESSAGE`` (``{snapshot}``, what an IDE's
logpoint field takes) is a *snapshot point*: each hit that passes its condition and hit
condition captures the frame and its callers' locals, and never pauses.
``raydebug break --snapshot --count N`` sets one with ``hitCondition`` ``<=N``: after N hits
in a process it takes no more there (its line stays watched, a count's check a run, until
the point is removed).

Names in conditions and logpoints: the frame's locals, then its globals, then the process's
labels (``RANK``, ``LOCAL_RANK``, ``RAYDEBUG_LABEL_<K>`` as ``K`` and the others of
``raydebug.agent.config.process_labels``: strings, each as it was set and in upper case),
then builtins; ``LABELS`` is the dict of them all. So ``RANK == "3"`` works unless the code
has a variable ``RANK`` of its own, which wins (it is what the code sees).
A condition that raises counts as false (said once per breakpoint on stderr); an expression
of a logpoint that raises shows as ``<Error: ...>`` in its text.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import FrameType
from typing import Any

from ...snapshots.format import SNAPSHOT_POINT_MESSAGE
from ..report import say


@dataclass(frozen=True)
class LineBreakpoint:
    """One DAP ``SourceBreakpoint`` (its spellings: ``hitCondition``, ``logMessage``)."""

    line: int
    condition: str = ""
    hit_condition: str = ""
    log_message: str = ""

    @property
    def is_snapshot(self) -> bool:
        """A snapshot point (see the module docstring), not a logpoint that logs."""
        return self.log_message.strip() == SNAPSHOT_POINT_MESSAGE

    @classmethod
    def from_wire(cls, data: Mapping[str, Any]) -> LineBreakpoint:
        return cls(line=int(data["line"]), condition=str(data.get("condition") or ""),
                   hit_condition=str(data.get("hitCondition") or ""),
                   log_message=str(data.get("logMessage") or ""))


@dataclass
class ArmedLine:
    """One line breakpoint as this process holds it, with its hit count.

    ``labels`` (each method's) are the process's labels under both spellings (see the
    module docstring). Errors in the user's expressions are said once, never raised.
    """

    spec: LineBreakpoint
    hits: int = 0
    said_error: bool = False

    def passes(self, frame: FrameType, labels: Mapping[str, str]) -> bool:
        """Whether this hit in ``frame`` counts: condition, then hit count (counted only
        when the condition holds, as pydevd)."""
        spec = self.spec
        if spec.condition:
            try:
                if not eval(spec.condition, frame.f_globals, _FrameNames(frame, labels)):
                    return False
            except Exception as error:
                self.say_once(f"condition {spec.condition!r} raised "
                              f"{type(error).__name__}: {error}; taken as false")
                return False
        self.hits += 1
        if spec.hit_condition:
            try:
                return hit_condition_met(spec.hit_condition, self.hits)
            except ValueError as error:
                self.say_once(str(error))
                return False
        return True

    def log_text(self, frame: FrameType, labels: Mapping[str, str]) -> str:
        """The logpoint's text, its expressions evaluated in ``frame``."""
        return format_log_message(self.spec.log_message,
                                  lambda expr: eval(expr, frame.f_globals,
                                                    _FrameNames(frame, labels)))

    def say_once(self, text: str) -> None:
        """Say ``text`` on stderr, the first time only for this breakpoint."""
        if not self.said_error:
            self.said_error = True
            say(f"breakpoint at line {self.spec.line}: {text}")


class _FrameNames(Mapping[str, Any]):
    """The names a condition sees: frame locals, globals, labels (see the module docstring)."""

    def __init__(self, frame: FrameType, labels: Mapping[str, str]) -> None:
        self._locals = frame.f_locals
        self._globals = frame.f_globals
        self._labels = labels

    def __getitem__(self, key: str) -> Any:
        for names in (self._locals, self._globals, self._labels):
            if key in names:
                return names[key]
        if key == "LABELS":
            return dict(self._labels)
        raise KeyError(key)

    def __iter__(self) -> Any:
        return iter({**self._labels, **self._globals, **self._locals})

    def __len__(self) -> int:
        return len({**self._labels, **self._globals, **self._locals})


_OPERATORS = ("==", ">=", "<=", "!=", ">", "<", "%")


def hit_condition_met(hit_condition: str, hits: int) -> bool:
    """DAP ``hitCondition`` as debugpy reads it: ``N`` (the Nth hit), ``>= N``, ``> N``,
    ``== N``, ``% N`` (every Nth). Raises ValueError for any other form."""
    text = hit_condition.strip()
    operator = next((op for op in _OPERATORS if text.startswith(op)), "==")
    number = text[len(operator):].strip() if text.startswith(operator) else text
    try:
        n = int(number)
    except ValueError:
        raise ValueError(f"hit condition {hit_condition!r} is not N, ==N, >N, >=N, <N, "
                         "<=N, !=N or %N") from None
    return {"==": hits == n, ">=": hits >= n, "<=": hits <= n, "!=": hits != n,
            ">": hits > n, "<": hits < n, "%": n > 0 and hits % n == 0}[operator]


def format_log_message(message: str, evaluate: Callable[[str], Any]) -> str:
    """A logpoint's text: each ``{expr}`` evaluated (``{{`` and ``}}`` are braces); an
    expression that raises shows as ``<Error: ...>`` (the logpoint still logs)."""
    out: list[str] = []
    i = 0
    while i < len(message):
        char = message[i]
        if char in "{}" and message[i + 1:i + 2] == char:
            out.append(char)
            i += 2
            continue
        if char == "{":
            depth, j = 1, i + 1
            while j < len(message) and depth:
                depth += {"{": 1, "}": -1}.get(message[j], 0)
                j += 1
            expression = message[i + 1:j - 1]
            try:
                out.append(str(evaluate(expression)))
            except Exception as error:
                out.append(f"<Error: {type(error).__name__}: {error}>")
            i = j
            continue
        out.append(char)
        i += 1
    return "".join(out)
