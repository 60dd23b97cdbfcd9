"""A file with cluster breakpoints compiled again with a call before each breakpoint line
(Python 3.10/3.11; :mod:`.code` swaps the result into the live functions).

:func:`make_plan` compiles ``source`` twice: as it is (the *original*, which must equal the
live code object by object, or the source is not what the process runs) and with
``HOOK_NAME(L)`` inserted before the statement that begins each breakpoint line ``L`` (the
*rewritten*). The inserted nodes carry line ``L``, so the frame the hook is called from is at
line ``L`` for tracebacks and pydevd. No code object is added or removed, so the two trees
pair up constant by constant (:class:`Plan`); a nested function's rewritten code is in its
parent's constants, so functions a rewritten function makes later are rewritten too.

Lines the rewrite cannot serve exactly as a trace function would, raised as
:class:`NotRewritableError` (the caller traces that file instead): a line with code that no
statement begins (a continuation line of a multi-line expression, a decorator, ``except``),
and a loop's head (``for``/``while``: a trace function sees it once per iteration).
A line with no code at all (a comment, a docstring) never stops either way and is left out.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import dataclass, field
from types import CodeType

from ...errors import NotRewritableError

HOOK_NAME = "__raydebug_line__"  # put into builtins by the code module
_LOOPS = (ast.For, ast.AsyncFor, ast.While)

CodeKey = tuple[str, int, "str | None"]


@dataclass
class Plan:
    """The original and rewritten code of one file for one set of breakpoint ``lines``."""

    filename: str
    lines: frozenset[int]
    module: CodeType  # the rewritten module code (what an import runs)
    pairs: dict[CodeKey, list[tuple[CodeType, CodeType]]] = field(default_factory=dict)

    def rewritten_for(self, live: CodeType) -> CodeType | None:
        """The rewritten counterpart of ``live`` (an original code object), or None when
        the source compiles to something else (it changed since the code was loaded)."""
        for original, rewritten in self.pairs.get(key(live), ()):
            if same_code(live, original):
                return rewritten
        return None

    def rewritten(self) -> Iterator[tuple[CodeType, CodeType]]:
        """Every (rewritten, original) pair."""
        for pairs in self.pairs.values():
            for original, rewritten in pairs:
                yield rewritten, original


def key(code: CodeType) -> CodeKey:
    return code.co_name, code.co_firstlineno, getattr(code, "co_qualname", None)


def same_code(a: CodeType, b: CodeType) -> bool:
    """Whether ``a`` and ``b`` are the same compilation (bytecode, names, constants, line
    table; nested code by its name and first line)."""
    return (a.co_code == b.co_code and a.co_names == b.co_names
            and a.co_varnames == b.co_varnames and a.co_linetable == b.co_linetable
            and _constants(a) == _constants(b))


def _constants(code: CodeType) -> tuple[object, ...]:
    # By type and repr: 0.0 == -0.0 and 1 == True, but they are other programs.
    return tuple(key(c) if isinstance(c, CodeType) else (type(c), repr(c))
                 for c in code.co_consts)


def make_plan(filename: str, source: str, lines: frozenset[int]) -> Plan:
    """Compile ``source`` (the file ``filename``) for breakpoints on ``lines``; raises
    :class:`NotRewritableError` (with a SyntaxError, too, as its cause)."""
    try:
        original = compile(source, filename, "exec", dont_inherit=True)
        tree = ast.parse(source, filename)
    except (SyntaxError, ValueError) as error:
        raise NotRewritableError(f"its source does not compile ({error})") from error
    wanted = _check_lines(tree, original, lines)
    _InsertCalls(wanted).visit(tree)
    try:
        rewritten = compile(tree, filename, "exec", dont_inherit=True)
    except (SyntaxError, ValueError) as error:
        raise NotRewritableError(f"its rewritten source does not compile ({error})") from error
    plan = Plan(filename, lines, rewritten)
    _pair(original, rewritten, plan.pairs)
    return plan


def _check_lines(tree: ast.Module, original: CodeType, lines: frozenset[int]) -> frozenset[int]:
    """The lines to put a call on; raises NotRewritableError for a line a call cannot serve."""
    with_code = {line for code in _walk(original) for _, _, line in code.co_lines()
                 if line is not None}
    starts = {node.lineno for node in ast.walk(tree) if isinstance(node, ast.stmt)}
    loops = {node.lineno for node in ast.walk(tree) if isinstance(node, _LOOPS)}
    wanted = lines & with_code
    for line in sorted(wanted):
        if line in loops:
            raise NotRewritableError(f"line {line} is a loop's head")
        if line not in starts:
            raise NotRewritableError(f"line {line} has code that no statement begins")
    return frozenset(wanted)


def _walk(code: CodeType) -> Iterator[CodeType]:
    yield code
    for const in code.co_consts:
        if isinstance(const, CodeType):
            yield from _walk(const)


def _pair(original: CodeType, rewritten: CodeType,
          out: dict[CodeKey, list[tuple[CodeType, CodeType]]]) -> None:
    out.setdefault(key(original), []).append((original, rewritten))
    inner = [c for c in original.co_consts if isinstance(c, CodeType)]
    inner_rewritten = [c for c in rewritten.co_consts if isinstance(c, CodeType)]
    if [key(c) for c in inner] != [key(c) for c in inner_rewritten]:
        raise NotRewritableError(f"the rewritten code of {original.co_name} does not pair up")
    for a, b in zip(inner, inner_rewritten, strict=True):
        _pair(a, b, out)


class _InsertCalls(ast.NodeTransformer):
    """Puts ``HOOK_NAME(L)`` before the first statement of each statement list that begins
    line ``L``; once per line (``a = 1; b = 2``, ``if x: y()`` call it once, first)."""

    def __init__(self, lines: frozenset[int]) -> None:
        self._lines = lines

    def generic_visit(self, node: ast.AST) -> ast.AST:
        own = node.lineno if isinstance(node, ast.stmt) else None
        for name, value in ast.iter_fields(node):
            if isinstance(value, list):
                called = own if own in self._lines else None
                items: list[object] = []
                for item in value:
                    if isinstance(item, ast.AST):
                        item = self.visit(item)
                    if (isinstance(item, ast.stmt) and item.lineno in self._lines
                            and item.lineno != called and not _is_future(item)):
                        items.append(_call(item))
                        called = item.lineno
                    items.append(item)
                setattr(node, name, items)
            elif isinstance(value, ast.AST):
                setattr(node, name, self.visit(value))
        return node


def _is_future(node: ast.stmt) -> bool:
    return isinstance(node, ast.ImportFrom) and node.module == "__future__"


def _call(before: ast.stmt) -> ast.stmt:
    """``HOOK_NAME(line)`` as a statement, every node of it on ``before``'s first line."""
    line, column = before.lineno, before.col_offset
    call = ast.Expr(ast.Call(ast.Name(HOOK_NAME, ast.Load()), [ast.Constant(line)], []))
    for node in ast.walk(call):
        node.lineno, node.end_lineno = line, line  # type: ignore[attr-defined]
        node.col_offset, node.end_col_offset = column, column  # type: ignore[attr-defined]
    return call
