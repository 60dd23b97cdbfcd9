"""Source code as the debuggee has it: fetched through ``evaluate``, and read with ``ast``.

Sources are read on the worker's machine, where the file may be the only copy (Ray ships
code with ``working_dir``), through :mod:`linecache`, which also knows sources that are not
files. ``ll`` and ``args`` need the enclosing function of a line: the source's AST has it.
"""

from __future__ import annotations

import ast
from typing import Any


def fetch_expression(path: str) -> str:
    """What to evaluate (context ``clipboard``: not truncated) to get ``path``'s text."""
    return f"''.join(__import__('linecache').getlines({path!r}))"


def lines_from_answer(result: str) -> list[str] | None:
    """The lines (with their ends) of the evaluate answer to :func:`fetch_expression`;
    None when the debuggee has no source for that file."""
    source = literal(result)
    return source.splitlines(keepends=True) if source else None


def frame_path(frame: dict[str, Any]) -> str:
    return str((frame.get("source") or {}).get("path") or "")


def literal(text: str) -> str:
    """pydevd answers a string evaluate with its repr."""
    try:
        value = ast.literal_eval(text)
    except (ValueError, SyntaxError):
        return text
    return value if isinstance(value, str) else text


Function = ast.FunctionDef | ast.AsyncFunctionDef


def _enclosing_function(source: str, line: int, name: str) -> Function | None:
    """The innermost function called ``name`` whose lines include ``line``."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return None
    best: Function | None = None
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == name:
            end = node.end_lineno or node.lineno
            if _start(node) <= line <= end and (best is None or _start(node) >= _start(best)):
                best = node
    return best


def _start(node: Function) -> int:
    return min([node.lineno, *(d.lineno for d in node.decorator_list)])


def function_span(source: str, line: int, name: str) -> tuple[int, int]:
    """First and last line of the function ``name`` around ``line`` (``ll``); the whole
    file at module level, as pdb does."""
    node = _enclosing_function(source, line, name)
    if node is None:
        return 1, len(source.splitlines())
    return _start(node), node.end_lineno or node.lineno


def function_arguments(source: str, line: int, name: str) -> list[str]:
    """Parameter names of the function ``name`` around ``line``, in order (``args``)."""
    node = _enclosing_function(source, line, name)
    if node is None:
        return []
    arguments = node.args
    names = [a.arg for a in (*arguments.posonlyargs, *arguments.args)]
    if arguments.vararg:
        names.append(arguments.vararg.arg)
    names += [a.arg for a in arguments.kwonlyargs]
    if arguments.kwarg:
        names.append(arguments.kwarg.arg)
    return names
