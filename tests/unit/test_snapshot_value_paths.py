"""Evaluating in a snapshot: names and paths into the captured values, never code."""

from __future__ import annotations

import pytest

from raydebug.errors import SnapshotEvaluateError
from raydebug.snapshots.format import Value
from raydebug.snapshots.value_paths import ONLY_CAPTURED, child_path, evaluate


def leaf(name: str, value: object) -> Value:
    return Value(name, type(value).__name__, repr(value))


def frame_locals() -> list[Value]:
    layers = Value("['layers']", "list", "[{'width': 8}, {'width': 4}]", children=[
        Value("[0]", "dict", "{'width': 8}", children=[leaf("['width']", 8)]),
        Value("[1]", "dict", "{'width': 4}", children=[leaf("['width']", 4)])])
    config = Value("config", "dict", "{'layers': [...], 3: 'three'}",
                   children=[layers, leaf("[3]", "three")])
    model = Value("model", "Model", "<Model object>", children=[
        leaf("name", "resnet"), Value("shape", "tuple", "(2, 3)", children=[
            leaf("[0]", 2), leaf("[1]", 3)])])
    rows = Value("rows", "list", "[0, 1, 2, ...]", truncated=True,
                 children=[leaf(f"[{i}]", i) for i in range(3)])
    deep = Value("deep", "list", "[[[[...]]]]", truncated=True)  # cut by the depth
    long_key = "k" * 40
    keyed = Value("keyed", "dict", "{...}", children=[
        Value(f"[{__import__('reprlib').repr(long_key)}]", "int", "1")])
    return [config, model, rows, deep, keyed, leaf("count", 7), leaf("text", "hi")]


@pytest.mark.parametrize("expression, shown", [
    ("count", "7"),
    ("config['layers'][0]", "{'width': 8}"),
    ("config['layers'][0]['width']", "8"),
    ("config['layers'][-1]['width']", "4"),
    ("config[3]", "'three'"),
    ("model.name", "'resnet'"),
    ("model.shape[1]", "3"),
    ("  model . shape [ 0 ] ", "2"),
    ("len(config['layers'])", "2"),
    ("len(model.shape)", "2"),
    ("keyed['" + "k" * 40 + "']", "1"),
])
def test_paths_reach_the_captured_values(expression, shown):
    assert evaluate(expression, frame_locals()).repr == shown


def test_a_tuple_of_paths_is_pdbs_p_a_b():
    """`p config, count` in a snapshot, as in pdb (it was refused: a tuple is not a path)."""
    values = frame_locals()
    shown = evaluate("count, model.shape[1], len(config['layers'])", values)
    assert (shown.type_name, shown.repr) == ("tuple", "(7, 3, 2)")
    assert [(c.name, c.repr) for c in shown.children or []] == [
        ("[0]", "7"), ("[1]", "3"), ("[2]", "2")]
    assert evaluate("model.shape[0],", values).repr == "(2,)"
    assert evaluate("(count, config)", values).children[1].children == values[0].children
    with pytest.raises(SnapshotEvaluateError, match="NameError: name 'missing'"):
        evaluate("count, missing", values)


def test_a_path_answers_the_captured_value_itself_children_and_all():
    values = frame_locals()
    assert evaluate("config", values) is values[0]
    assert evaluate("len(config['layers'])", values).type_name == "int"


@pytest.mark.parametrize("expression", [
    "count + 1", "__import__('os').system('true')", "config.get('layers')", "rows[0:2]",
    "[count]", "lambda: 0", "x = 1", "count if count else 0", "len(*rows)", "str(count)",
    "config[count]", "config[{'a'}]", "", "rows[", "count, *rows", "()",
])
def test_anything_else_is_refused_without_running(expression):
    with pytest.raises(SnapshotEvaluateError, match="a snapshot can only show captured values"):
        evaluate(expression, frame_locals())
    assert ONLY_CAPTURED.startswith("a snapshot can only show captured values")


@pytest.mark.parametrize("expression, why", [
    ("missing", "NameError: name 'missing' is not a captured local"),
    ("config['absent']", r"KeyError: config\['absent'\]: not in the captured value"),
    ("model.absent", "AttributeError: model.absent: not in the captured value"),
    ("rows[7]", "not among the 3 parts the snapshot kept"),
    ("rows[-1]", "kept only the first 3 items, not the last"),
    ("len(rows)", "unknown, the snapshot kept only its first 3 items"),
    ("deep[0]", "deeper than the capture went"),
    ("count.real", "the snapshot kept only its repr"),
    ("len(count)", "kept no items of it"),
    ("len(model)", "Model is not a container"),
    ("config['layers'][-3]", "index out of range"),
])
def test_what_was_not_captured_is_said_so(expression, why):
    with pytest.raises(SnapshotEvaluateError, match=why):
        evaluate(expression, frame_locals())


def test_a_childs_path_is_the_expression_that_reaches_it():
    config = frame_locals()[0]
    layers = config.children[0]
    assert child_path("config", layers) == "config['layers']"
    assert child_path("m", leaf("name", 1)) == "m.name"
    assert child_path("x", Value("...", "", "<2 more not captured>", None, True)) is None
    values = frame_locals()
    for path in ("config['layers'][1]", "model.shape[0]"):
        parent, _, _ = path.rpartition("[") if path.endswith("]") else path.rpartition(".")
        assert child_path(parent, evaluate(path, values)) == path
