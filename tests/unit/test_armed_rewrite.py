"""agent/armed/rewrite.py in memory: where the call goes, which lines it refuses, and the pairing of
rewritten code with the live functions (agent/armed/code.py: the 3.10/3.11 path)."""

from __future__ import annotations

import builtins
import textwrap
from typing import Any

import pytest

from raydebug.agent.armed.rewrite import HOOK_NAME, make_plan
from raydebug.errors import NotRewritableError

SOURCE = textwrap.dedent("""
    def f(x):
        a = 1; b = 2
        if x: a = 3
        for i in range(2):
            b += i
        return a + b

    def g():
        return [
            1]
""")


def run_rewritten(lines: set[int]) -> list[int]:
    """The lines at which rewritten ``f(1)`` calls the hook."""
    plan = make_plan("/m.py", SOURCE, frozenset(lines))
    namespace: dict[str, Any] = {}
    exec(plan.module, namespace)
    called: list[int] = []
    setattr(builtins, HOOK_NAME, called.append)
    try:
        assert namespace["f"](1) == 6
    finally:
        delattr(builtins, HOOK_NAME)
    return called


def test_a_call_before_each_breakpoint_line_once_per_run_of_its_statement() -> None:
    assert run_rewritten({3, 4, 6, 7}) == [3, 4, 6, 6, 7]


def test_loop_heads_and_continuation_lines_are_refused() -> None:
    with pytest.raises(NotRewritableError, match="loop"):
        make_plan("/m.py", SOURCE, frozenset({5}))
    with pytest.raises(NotRewritableError, match="no statement begins"):
        make_plan("/m.py", SOURCE, frozenset({11}))
    assert run_rewritten({1, 8}) == []  # no code there (blank, the def's line at import)


def test_the_live_code_pairs_with_its_rewritten_code_only_if_it_is_the_same_compilation(
) -> None:
    namespace: dict[str, Any] = {}
    exec(compile(SOURCE, "/m.py", "exec", dont_inherit=True), namespace)
    plan = make_plan("/m.py", SOURCE, frozenset({3}))
    rewritten = plan.rewritten_for(namespace["f"].__code__)
    assert rewritten is not None and HOOK_NAME in rewritten.co_names
    assert plan.rewritten_for(namespace["g"].__code__) is not None
    changed: dict[str, Any] = {}
    exec(compile(SOURCE.replace("a = 3", "a = 4"), "/m.py", "exec"), changed)
    assert plan.rewritten_for(changed["f"].__code__) is None
