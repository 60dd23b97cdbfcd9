"""The one exception tree: every error class lives in raydebug.errors, drawn in its docstring,
and socket errors become HubUnreachableError in one way."""

from __future__ import annotations

import ast
import pathlib
import urllib.error

import raydebug
from raydebug import errors
from raydebug.errors import (
    DapRequestError,
    HubUnreachableError,
    RaydebugError,
    hub_unreachable,
)

SOURCE = pathlib.Path(raydebug.__file__).parent


def test_no_exception_class_is_defined_outside_errors_py():
    outside = []
    for path in SOURCE.rglob("*.py"):
        if path.name == "errors.py" and path.parent == SOURCE:
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ClassDef) and any(
                    getattr(base, "id", getattr(base, "attr", "")).endswith(("Error",
                                                                            "Exception"))
                    for base in node.bases):
                outside.append(f"{path.relative_to(SOURCE)}: {node.name}")
    assert outside == []


def test_every_error_is_drawn_in_the_tree():
    classes = [value for value in vars(errors).values()
               if isinstance(value, type) and issubclass(value, RaydebugError)]
    tree = errors.__doc__ or ""
    assert [cls.__name__ for cls in classes if f"── {cls.__name__} " not in tree
            and cls is not RaydebugError] == []


def test_socket_errors_say_the_os_reason_and_keep_the_address():
    refused = hub_unreachable("h:1", ConnectionRefusedError(111, "Connection refused"),
                              saying="no hub at")
    assert isinstance(refused, HubUnreachableError)
    assert str(refused) == "no hub at h:1 (connection refused)"
    assert refused.address == "h:1"
    wrapped = urllib.error.URLError(ConnectionRefusedError(111, "Connection refused"))
    assert str(hub_unreachable("h:1", wrapped)) == \
        "cannot reach the hub at h:1 (connection refused)"
    assert str(hub_unreachable("h:1", TimeoutError())) == "cannot reach the hub at h:1 " \
        "(TimeoutError)"


def test_a_refused_request_names_its_command():
    error = DapRequestError("evaluate", None, session_id="s1")
    assert (str(error), error.command, error.message, error.body, error.session_id) == \
        ("evaluate failed", "evaluate", "evaluate failed", {}, "s1")
    assert str(DapRequestError("attach", "already being debugged")) == \
        "already being debugged"
