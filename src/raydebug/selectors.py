"""Process selectors: ``KEY=VALUE`` terms, all of which a process must match.

Shared by ``raydebug ps``, ``stacks`` and ``pause`` and by the hub's HTTP API. Pure: a
selector is parsed once (:func:`parse`) and tested against process records (the JSON of
``GET /api/processes``) with :meth:`Selector.matches`.

Keys: ``pid``, ``host``, ``node`` (a node id prefix, or the node's address), ``job`` (a job
id, or its prefix), ``actor`` (actor class), ``task`` (task name), ``rank`` (``3``, ``0-7``,
``1,5,9``, or a mix: ``0-3,8``), and any label key (``LOCAL_RANK=0``; label keys match
without regard to case).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from .errors import SelectorError

KEYS = ("pid", "host", "node", "job", "actor", "task", "rank")
MAX_RANGE = 1_000_000  # a rank range larger than this is surely a typo


@dataclass(frozen=True)
class Term:
    key: str
    value: str
    ranks: frozenset[int] | tuple[tuple[int, int], ...] = ()

    def matches(self, process: dict[str, Any]) -> bool:
        labels = {str(k).lower(): str(v) for k, v in (process.get("labels") or {}).items()}
        if self.key == "pid":
            return str(process.get("pid")) == self.value
        if self.key == "host":
            return process.get("host") == self.value
        if self.key == "node":
            node_id = process.get("node_id") or ""
            return (bool(node_id) and node_id.startswith(self.value)) \
                or process.get("node_ip") == self.value
        if self.key == "job":
            job_id = process.get("job_id") or ""
            return bool(job_id) and job_id.startswith(self.value)
        if self.key == "actor":
            return process.get("actor_class") == self.value
        if self.key == "task":
            return process.get("task_name") == self.value
        if self.key == "rank":
            rank = labels.get("rank", "")
            if not rank.lstrip("-").isdigit():
                return False
            number = int(rank)
            return any(low <= number <= high for low, high in self.ranks)  # type: ignore[misc]
        return labels.get(self.key) == self.value


@dataclass(frozen=True)
class Selector:
    terms: tuple[Term, ...] = ()

    def matches(self, process: dict[str, Any]) -> bool:
        """Whether ``process`` (a process record) matches every term (an empty selector
        matches every process)."""
        return all(term.matches(process) for term in self.terms)

    def select(self, processes: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
        return [process for process in processes if self.matches(process)]

    @property
    def text(self) -> str:
        return " ".join(f"{term.key}={term.value}" for term in self.terms) or "(everything)"

    @property
    def needs_activity(self) -> bool:
        """Whether a term asks what a process runs now (read from the process on ask)."""
        return any(term.key in ("task", "actor") for term in self.terms)


def parse(terms: Iterable[str]) -> Selector:
    """Parse ``KEY=VALUE`` terms; raises :class:`SelectorError` naming the bad term."""
    return Selector(tuple(parse_term(term) for term in terms))


def parse_term(text: str) -> Term:
    key, equals, value = text.partition("=")
    key, value = key.strip(), value.strip()
    if not equals or not key or not value:
        raise SelectorError(f"selector term {text!r} is not KEY=VALUE (keys: "
                            f"{', '.join(KEYS)}, or a label key)", term=text)
    key = key.lower()  # a known key, or a label key: labels match without regard to case
    if key == "pid" and not value.isdigit():
        raise SelectorError(f"selector term {text!r}: a pid is a number", term=text)
    if key == "rank":
        return Term(key, value, _ranks(value, text))
    return Term(key, value)


def _ranks(value: str, text: str) -> tuple[tuple[int, int], ...]:
    """``3`` / ``0-7`` / ``1,5,9`` / ``0-3,8`` -> inclusive ranges."""
    ranges = []
    for part in value.split(","):
        low, dash, high = part.strip().partition("-")
        if not low.isdigit() or (dash and not high.isdigit()):
            raise SelectorError(f"selector term {text!r}: a rank is N, N-M or N,M,... "
                                "(e.g. rank=3, rank=0-7, rank=1,5,9)", term=text)
        start, end = int(low), int(high) if dash else int(low)
        if end < start or end - start > MAX_RANGE:
            raise SelectorError(f"selector term {text!r}: the range {part} is empty or too "
                                "large", term=text)
        ranges.append((start, end))
    return tuple(ranges)
