"""Process selectors (raydebug.selectors): parsing and matching, in memory."""

from __future__ import annotations

import pytest

from raydebug.errors import SelectorError
from raydebug.selectors import parse

P = [{"id": f"p{r}", "pid": 100 + r, "host": "n1" if r < 2 else "n2",
      "labels": {"RANK": str(r), "LOCAL_RANK": str(r % 2)},
      "node_id": f"abcd{r}", "node_ip": "10.0.0.1", "job_id": "02000000",
      "actor_class": "Trainer" if r == 3 else None,
      "task_name": "train_step" if r == 1 else None} for r in range(4)]


def ids(*terms: str) -> list[str]:
    return [p["id"] for p in parse(terms).select(P)]


@pytest.mark.parametrize("terms, expected", [
    ((), ["p0", "p1", "p2", "p3"]),
    (("rank=1",), ["p1"]),
    (("rank=0-2",), ["p0", "p1", "p2"]),
    (("rank=0,3",), ["p0", "p3"]),
    (("rank=0-1,3",), ["p0", "p1", "p3"]),
    (("host=n2",), ["p2", "p3"]),
    (("host=n2", "local_rank=0"), ["p2"]),
    (("LOCAL_RANK=1",), ["p1", "p3"]),
    (("pid=102",), ["p2"]),
    (("node=abcd3",), ["p3"]),
    (("node=10.0.0.1",), ["p0", "p1", "p2", "p3"]),
    (("job=0200",), ["p0", "p1", "p2", "p3"]),
    (("actor=Trainer",), ["p3"]),
    (("task=train_step",), ["p1"]),
    (("rank=9",), []),
    (("colour=red",), []),
])
def test_terms_all_match(terms, expected):
    assert ids(*terms) == expected


@pytest.mark.parametrize("term, complaint", [
    ("rank", "is not KEY=VALUE"),
    ("=3", "is not KEY=VALUE"),
    ("rank=", "is not KEY=VALUE"),
    ("rank=a", "a rank is N, N-M"),
    ("rank=5-2", "empty or too large"),
    ("pid=x", "a pid is a number"),
])
def test_a_malformed_term_names_itself_and_the_keys(term, complaint):
    with pytest.raises(SelectorError, match=complaint) as error:
        parse([term])
    assert error.value.term == term
    assert isinstance(error.value, ValueError)  # the hub answers 400


def test_the_keys_are_named_when_a_term_has_no_value():
    with pytest.raises(SelectorError, match="keys: pid, host, node, job, actor, task, rank"):
        parse(["oops"])


def test_activity_terms_are_known():
    assert parse(["task=f"]).needs_activity and not parse(["rank=1"]).needs_activity
