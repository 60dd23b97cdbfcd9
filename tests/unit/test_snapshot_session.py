"""A snapshot as a read-only DAP session, in memory: a client's whole conversation with it."""

from __future__ import annotations

from typing import Any

import pytest

from raydebug.protocol import Event, Message, Request, Response
from raydebug.protocol.snapshot_session import THREAD_ID, SnapshotSession
from raydebug.snapshots.format import ExceptionInfo, FrameCapture, Snapshot, Value

SOURCE = "def train(config):\n    rows = load()\n    raise ValueError('bad row')\n"


def failure_snapshot() -> Snapshot:
    config = Value("config", "dict", "{'layers': [{...}], 'lr': 0.1}", children=[
        Value("['layers']", "list", "[{'width': 8}]", children=[
            Value("[0]", "dict", "{'width': 8}", children=[
                Value("['width']", "int", "8")])]),
        Value("['lr']", "float", "0.1")])
    rows = Value("rows", "list", "[0, 1, ...]", truncated=True,
                 children=[Value("[0]", "int", "0"), Value("[1]", "int", "1")])
    return Snapshot(
        id="x00aa11bb22cc", reason="exception", time=1_700_000_000.0,
        process={"pid": 4242, "host": "node-1", "labels": {"RANK": "3"},
                 "task_name": "train_step"},
        thread_name="MainThread",
        exception=ExceptionInfo("ValueError", "bad row",
                                "Traceback (most recent call last):\n...\nValueError: bad row\n"),
        frames=[FrameCapture("train", "/job/train.py", 3, SOURCE,
                             [config, rows, Value("...", "", "<4 more not captured>", None,
                                                  True)]),
                FrameCapture("<module>", "/job/train.py", 9, SOURCE, []),
                FrameCapture("run", "/usr/lib/runner.py", 20, None,
                             [Value("n", "int", "1")])])


class Client:
    """Sends requests to one session and keeps every message it answered with."""

    def __init__(self, snapshot: Snapshot) -> None:
        self.session = SnapshotSession(snapshot)
        self.seq = 0

    def send(self, command: str, **arguments: Any) -> list[Message]:
        self.seq += 1
        messages = self.session.handle(Request(self.seq, command, arguments))
        responses = [m for m in messages if isinstance(m, Response)]
        assert len(responses) == 1 and messages[0] is responses[0], messages  # one, first
        assert responses[0].request_seq == self.seq and responses[0].command == command
        return messages

    def ask(self, command: str, **arguments: Any) -> dict[str, Any]:
        response = self.send(command, **arguments)[0]
        assert isinstance(response, Response)
        assert response.success, response.message
        return response.body

    def refused(self, command: str, **arguments: Any) -> str:
        response = self.send(command, **arguments)[0]
        assert isinstance(response, Response) and not response.success
        assert response.message
        return response.message

    def attach(self) -> Event:
        """An IDE's start: initialize, attach, configurationDone; the stopped event."""
        self.ask("initialize", adapterID="debugpy")
        events = self.send("attach", raydebug={"session": "x00aa11bb22cc"})[1:]
        assert [e.event for e in events if isinstance(e, Event)][:2] == [
            "initialized", "capabilities"]
        self.ask("setExceptionBreakpoints", filters=[])
        done = self.send("configurationDone")
        stopped = [m for m in done if isinstance(m, Event) and m.event == "stopped"]
        assert len(stopped) == 1
        return stopped[0]

    def locals_of(self, frame_id: int) -> list[dict[str, Any]]:
        scopes = self.ask("scopes", frameId=frame_id)["scopes"]
        assert [s["name"] for s in scopes] == ["Locals"]
        return self.variables(scopes[0]["variablesReference"])

    def variables(self, reference: int) -> list[dict[str, Any]]:
        variables: list[dict[str, Any]] = self.ask(
            "variables", variablesReference=reference)["variables"]
        return variables


def test_a_failure_stops_on_its_exception_with_exception_info():
    client = Client(failure_snapshot())
    stopped = client.attach()
    assert stopped.body["reason"] == "exception"
    assert stopped.body["threadId"] == THREAD_ID
    assert stopped.body["text"] == "ValueError: bad row"
    info = client.ask("exceptionInfo", threadId=THREAD_ID)
    assert info["exceptionId"] == "ValueError" and info["description"] == "bad row"
    # As pydevd writes it: newest first, each frame's line of code when it was captured.
    assert info["details"]["stackTrace"] == (
        '  File "/job/train.py", line 3, in train\n'
        "    raise ValueError('bad row')\n"
        '  File "/job/train.py", line 9, in <module>\n'
        '  File "/usr/lib/runner.py", line 20, in run\n')


def test_a_snapshot_points_hit_stops_with_reason_snapshot():
    snapshot = failure_snapshot()
    point = Snapshot(snapshot.id, "snapshot", snapshot.time, snapshot.process,
                     snapshot.thread_name, None, snapshot.frames)
    client = Client(point)
    assert client.attach().body["reason"] == "snapshot"
    assert "snapshot point, not of an exception" in client.refused("exceptionInfo",
                                                                    threadId=THREAD_ID)


def test_the_one_thread_is_named_after_its_process():
    client = Client(failure_snapshot())
    client.attach()
    assert client.ask("threads")["threads"] == [
        {"id": THREAD_ID, "name": "rank 3 · train_step · pid 4242 · MainThread"}]


def test_the_stack_is_the_captured_frames_innermost_first():
    client = Client(failure_snapshot())
    client.attach()
    body = client.ask("stackTrace", threadId=THREAD_ID)
    frames = body["stackFrames"]
    assert [(f["id"], f["name"], f["line"]) for f in frames] == [
        (1, "train", 3), (2, "<module>", 9), (3, "run", 20)]
    assert body["totalFrames"] == 3
    assert frames[0]["source"]["path"] == "/job/train.py"
    assert frames[0]["source"]["name"] == "train.py"
    # One reference per file with captured text; none without.
    assert frames[0]["source"]["sourceReference"] == frames[1]["source"]["sourceReference"]
    assert "sourceReference" not in frames[2]["source"]
    paged = client.ask("stackTrace", threadId=THREAD_ID, startFrame=1, levels=1)
    assert [f["id"] for f in paged["stackFrames"]] == [2]


def test_a_frames_source_comes_from_the_capture():
    client = Client(failure_snapshot())
    client.attach()
    frame = client.ask("stackTrace", threadId=THREAD_ID)["stackFrames"][0]
    reference = frame["source"]["sourceReference"]
    assert client.ask("source", sourceReference=reference,
                      source=frame["source"])["content"] == SOURCE
    assert client.ask("source", source={"path": "/job/train.py"})["content"] == SOURCE
    assert "holds no source for /usr/lib/runner.py" in client.refused(
        "source", source={"path": "/usr/lib/runner.py"})
    assert "holds no source" in client.refused("source", sourceReference=99)


def test_locals_expand_through_the_captured_tree():
    client = Client(failure_snapshot())
    client.attach()
    config, rows, cut = client.locals_of(1)
    assert (config["name"], config["type"], config["evaluateName"]) == (
        "config", "dict", "config")
    assert cut["name"] == "..." and cut["variablesReference"] == 0
    assert "evaluateName" not in cut
    layers, lr = client.variables(config["variablesReference"])
    assert (lr["value"], lr["variablesReference"]) == ("0.1", 0)
    assert layers["evaluateName"] == "config['layers']"
    (first,) = client.variables(layers["variablesReference"])
    assert first["evaluateName"] == "config['layers'][0]"
    (width,) = client.variables(first["variablesReference"])
    assert (width["name"], width["value"], width["evaluateName"]) == (
        "['width']", "8", "config['layers'][0]['width']")
    # A container the capture cut says so at its end, as a virtual entry.
    *items, more = client.variables(rows["variablesReference"])
    assert [i["value"] for i in items] == ["0", "1"]
    assert more["presentationHint"] == {"kind": "virtual"}
    # The same value keeps its reference.
    assert client.locals_of(1)[0]["variablesReference"] == config["variablesReference"]
    assert client.locals_of(3) == [{"name": "n", "value": "1", "type": "int",
                                    "variablesReference": 0, "evaluateName": "n"}]


def test_evaluate_reads_names_and_paths_in_the_frame_asked():
    client = Client(failure_snapshot())
    client.attach()
    answer = client.ask("evaluate", expression="config['layers'][0]", frameId=1,
                        context="repl")
    assert (answer["result"], answer["type"]) == ("{'width': 8}", "dict")
    (width,) = client.variables(answer["variablesReference"])
    assert width["value"] == "8"
    assert client.ask("evaluate", expression="len(config['layers'])",
                      frameId=1)["result"] == "1"
    assert client.ask("evaluate", expression="n", frameId=3)["result"] == "1"
    assert client.ask("evaluate", expression="config['lr']")["result"] == "0.1"  # innermost
    assert "NameError" in client.refused("evaluate", expression="config", frameId=3)
    assert client.refused("evaluate", expression="__import__('os').getpid()", frameId=1) \
        .startswith("a snapshot can only show captured values")
    assert "no frame 9" in client.refused("evaluate", expression="n", frameId=9)


@pytest.mark.parametrize("command", ["next", "stepIn", "stepOut", "pause", "stepBack",
                                     "goto", "restartFrame"])
def test_stepping_and_pausing_are_refused_saying_why(command):
    client = Client(failure_snapshot())
    client.attach()
    message = client.refused(command, threadId=THREAD_ID)
    assert message.startswith("snapshot x00aa11bb22cc is a capture of one moment")
    assert "cannot " in message


def test_values_cannot_be_changed():
    client = Client(failure_snapshot())
    client.attach()
    assert "cannot change a value" in client.refused("setVariable", variablesReference=1,
                                                     name="config", value="1")
    assert "cannot change a value" in client.refused("setExpression", expression="n",
                                                     value="2")


def test_breakpoints_are_answered_unverified():
    client = Client(failure_snapshot())
    client.attach()
    answer = client.ask("setBreakpoints", source={"path": "/job/train.py"},
                        breakpoints=[{"line": 2}])
    assert answer["breakpoints"][0]["verified"] is False
    assert "breakpoints do not apply" in answer["breakpoints"][0]["message"]


def test_continue_ends_the_view_and_disconnect_closes_it():
    client = Client(failure_snapshot())
    client.attach()
    messages = client.send("continue", threadId=THREAD_ID)
    assert [m.event for m in messages[1:] if isinstance(m, Event)] == ["terminated"]
    assert "has ended" in client.refused("stackTrace", threadId=THREAD_ID)
    assert not client.session.over
    client.ask("disconnect")
    assert client.session.over
    assert "closed" in client.refused("threads")


def test_unknown_commands_and_bad_arguments_get_one_error_each():
    client = Client(failure_snapshot())
    client.attach()
    assert "'modules' does not apply to a snapshot" in client.refused("modules")
    assert "no thread 7" in client.refused("stackTrace", threadId=7)
    assert "no variablesReference 99" in client.refused("variables", variablesReference=99)
    assert "bad arguments" in client.refused("variables")
    assert "bad arguments" in client.refused("evaluate", frameId=1)


def test_the_stop_comes_once_after_configuration():
    client = Client(failure_snapshot())
    client.attach()
    assert client.send("configurationDone")[1:] == []


def test_completions_offer_the_frames_captured_names():
    client = Client(failure_snapshot())
    client.attach()
    targets = client.ask("completions", text="p co", column=5, frameId=1)["targets"]
    assert [(t["label"], t["start"], t["length"]) for t in targets] == [("config", 2, 2)]
    assert client.ask("completions", text="config.", frameId=1)["targets"] == []


def test_what_the_capture_takes_reads_back_through_the_session():
    """The agent's own capture of a real failure, read as a client would: keys named as
    the capture names them, a width cut said so, an object's attributes by path."""
    from raydebug.snapshots.capture import capture_exception
    from raydebug.snapshots.limits import SnapshotLimits

    class Model:
        def __init__(self) -> None:
            self.name = "resnet"
            self.shape = (2, 3)

    def fail(config: dict[Any, Any], rows: list[int], model: Model) -> None:
        raise KeyError("missing")

    try:
        fail({"layers": [{"width": 8}], 7: "seven"}, list(range(200)), Model())
    except KeyError as error:
        snapshot = capture_exception(error, {"pid": 1, "host": "h"},
                                     SnapshotLimits(width=100))
    client = Client(snapshot)
    client.attach()

    def ask(expression: str) -> str:
        return str(client.ask("evaluate", expression=expression, frameId=1)["result"])

    assert ask("config['layers'][0]['width']") == "8"
    assert ask("config[7]") == "'seven'"
    assert ask("model.shape[1]") == "3"
    assert ask("len(config)") == "2"
    assert "kept only its first 100 items" in client.refused("evaluate", expression="len(rows)",
                                                             frameId=1)
    rows = next(v for v in client.locals_of(1) if v["name"] == "rows")
    assert client.variables(rows["variablesReference"])[-1]["name"] == "..."


def test_a_snapshot_without_frames_says_so():
    empty = Snapshot("x0", "snapshot", 1.0, {"pid": 1}, "MainThread")
    client = Client(empty)
    client.attach()
    assert client.ask("stackTrace", threadId=THREAD_ID)["stackFrames"] == []
    assert "holds no frames" in client.refused("evaluate", expression="x")
    assert "holds no frames" in client.refused("scopes", frameId=1)
