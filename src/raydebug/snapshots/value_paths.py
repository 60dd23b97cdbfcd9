"""What a reader of a snapshot may evaluate: names and paths into the captured values.

A snapshot holds no live object, so nothing can run. An expression is parsed with :mod:`ast`
(never evaluated) and only these forms are walked through a frame's captured
:class:`~.format.Value` tree:

- a name: a local of the frame (``rows``);
- an item: ``x[KEY]`` where ``KEY`` is a literal (``config['layers']``, ``rows[0]``,
  ``rows[-1]``, ``table[(1, 2)]``): the child the capture named ``[repr(KEY)]``; a negative
  index counts from the end of a list or tuple captured whole;
- an attribute: ``obj.attr``: the child named ``attr`` (an object's ``__dict__`` entry);
- ``len(x)``: the number of items captured of a container captured whole;
- a tuple of these (``config, i, total``: pdb's ``p a, b``): a new ``tuple`` whose items
  are the values found.

Anything else fails with :data:`ONLY_CAPTURED`; a path to what was not captured fails with a
:class:`SnapshotEvaluateError` saying why (not a local, not an item, cut by the capture's
depth or width). :func:`child_path` is the inverse: the expression that reaches a child, so
that a client can copy it or watch it (DAP ``evaluateName``).
"""

from __future__ import annotations

import ast
import reprlib
from collections.abc import Sequence
from dataclasses import replace

from ..errors import SnapshotEvaluateError
from .format import Value

ONLY_CAPTURED = ("a snapshot can only show captured values: a local, its items and attributes "
                 "(config['layers'][0], obj.attr) and len(x)")
# Types whose children are their items in order: a negative index counts from their end.
_ORDERED = {"list", "tuple"}
_CONTAINERS = _ORDERED | {"set", "frozenset", "dict"}


def evaluate(expression: str, scope: Sequence[Value]) -> Value:
    """The captured value ``expression`` names among ``scope`` (a frame's locals).

    ``len(x)`` gives a new leaf Value of type ``int``; every other answer is one of the
    captured values itself, children and all. Raises :class:`SnapshotEvaluateError`."""
    try:
        tree = ast.parse(expression.strip(), mode="eval")
    except SyntaxError:
        raise SnapshotEvaluateError(ONLY_CAPTURED) from None
    return _walk(tree.body, scope)


def child_path(parent: str, child: Value) -> str | None:
    """The expression of ``child`` of the value at ``parent`` (None when none reaches it:
    a marker of what the capture cut, an attribute that is no identifier)."""
    if child.name.startswith("[") and child.name.endswith("]"):
        return parent + child.name
    if child.name.isidentifier():
        return f"{parent}.{child.name}"
    return None


def _walk(node: ast.expr, scope: Sequence[Value]) -> Value:
    if isinstance(node, ast.Name):
        found = _named(scope, node.id)
        if found is None:
            raise SnapshotEvaluateError(f"NameError: name {node.id!r} is not a captured "
                                        "local of this frame")
        return found
    if isinstance(node, ast.Attribute):
        parent = _walk(node.value, scope)
        return _child(parent, (node.attr,), f"{ast.unparse(node.value)}.{node.attr}",
                      "AttributeError")
    if isinstance(node, ast.Subscript):
        parent = _walk(node.value, scope)
        key = _literal_key(node.slice)
        return _item(parent, key, ast.unparse(node))
    if _is_len_call(node):
        assert isinstance(node, ast.Call)
        return _length(_walk(node.args[0], scope), ast.unparse(node.args[0]))
    if isinstance(node, ast.Tuple) and node.elts and \
            not any(isinstance(item, ast.Starred) for item in node.elts):
        items = [replace(_walk(item, scope), name=f"[{index}]")
                 for index, item in enumerate(node.elts)]
        shown = ", ".join(item.repr for item in items)
        return Value(name=ast.unparse(node), type_name="tuple",
                     repr=f"({shown},)" if len(items) == 1 else f"({shown})", children=items)
    raise SnapshotEvaluateError(ONLY_CAPTURED)


def _named(values: Sequence[Value], name: str) -> Value | None:
    return next((value for value in values if value.name == name), None)


def _literal_key(node: ast.expr) -> object:
    try:
        key = ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        raise SnapshotEvaluateError(ONLY_CAPTURED) from None
    if isinstance(key, (slice, set, dict, list)):  # a slice builds a new value
        raise SnapshotEvaluateError(ONLY_CAPTURED)
    return key


def _item(parent: Value, key: object, text: str) -> Value:
    if isinstance(key, int) and not isinstance(key, bool) and key < 0 \
            and parent.type_name in _ORDERED and parent.children is not None:
        if parent.truncated:
            raise SnapshotEvaluateError(f"IndexError: {text}: the snapshot kept only the "
                                        f"first {len(parent.children)} items, not the last")
        if -key > len(parent.children):
            raise SnapshotEvaluateError(f"IndexError: {text}: index out of range")
        key = len(parent.children) + key
    # The capture names a key by reprlib's repr, which cuts a long one: try both.
    names = dict.fromkeys((f"[{key!r}]", f"[{reprlib.repr(key)}]"))
    return _child(parent, tuple(names), text, "KeyError" if parent.type_name not in _ORDERED
                  else "IndexError")


def _child(parent: Value, names: tuple[str, ...], text: str, error: str) -> Value:
    if parent.children is None:
        why = ("its parts lie deeper than the capture went" if parent.truncated
               else "the snapshot kept only its repr")
        raise SnapshotEvaluateError(f"{text}: {why}: {parent.name} = {parent.repr}")
    for name in names:
        found = _named(parent.children, name)
        if found is not None:
            return found
    if parent.truncated:
        raise SnapshotEvaluateError(f"{error}: {text}: not among the {len(parent.children)} "
                                    "parts the snapshot kept")
    raise SnapshotEvaluateError(f"{error}: {text}: not in the captured value")


def _is_len_call(node: ast.expr) -> bool:
    return (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
            and node.func.id == "len" and len(node.args) == 1 and not node.keywords
            and not isinstance(node.args[0], ast.Starred))


def _length(value: Value, text: str) -> Value:
    items = value.children is not None and (value.type_name in _CONTAINERS or (
        value.children and all(child.name.startswith("[") for child in value.children)))
    if value.children is not None and not items:
        raise SnapshotEvaluateError(f"len({text}): {value.type_name} is not a container the "
                                    "snapshot knows the length of")
    if value.children is None:
        raise SnapshotEvaluateError(f"len({text}): the snapshot kept no items of it, only "
                                    f"its repr: {value.repr}")
    if value.truncated:
        raise SnapshotEvaluateError(f"len({text}): unknown, the snapshot kept only its first "
                                    f"{len(value.children)} items")
    return Value(name=f"len({text})", type_name="int", repr=str(len(value.children)))
