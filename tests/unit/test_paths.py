"""The hub's path translation between a worker's working_dir and the client's checkout."""

from __future__ import annotations

import json
import subprocess
import sys

from raydebug.protocol.paths import PathTranslator

REMOTE = "/tmp/ray/session_1/runtime_resources/working_dir_files/_ray_pkg_5a1b2c"
LOCAL = "/home/me/code"
PATHS = PathTranslator(remote_root=REMOTE, local_root=LOCAL)


def body(message: dict) -> bytes:
    return json.dumps(message).encode()


def test_stack_frames_from_the_worker_name_the_clients_files():
    response = {"seq": 7, "type": "response", "request_seq": 3, "command": "stackTrace",
                "success": True, "body": {"stackFrames": [
                    {"id": 1, "name": "double", "line": 3,
                     "source": {"path": f"{REMOTE}/pkg/helper.py"}},
                    {"id": 2, "name": "<module>", "line": 9,
                     "source": {"path": "/usr/lib/python3.11/runpy.py"}}]}}
    frames = json.loads(PATHS.to_local(body(response)))["body"]["stackFrames"]
    assert frames[0]["source"]["path"] == f"{LOCAL}/pkg/helper.py"
    assert frames[1]["source"]["path"] == "/usr/lib/python3.11/runpy.py"  # not under the root


def test_breakpoints_from_the_client_name_the_workers_files():
    request = {"seq": 4, "type": "request", "command": "setBreakpoints",
               "arguments": {"source": {"path": f"{LOCAL}/helper.py"},
                             "breakpoints": [{"line": 4}]}}
    arguments = json.loads(PATHS.to_remote(body(request)))["arguments"]
    assert arguments["source"]["path"] == f"{REMOTE}/helper.py"
    assert arguments["breakpoints"] == [{"line": 4}]
    assert PATHS.arguments_to_remote(request["arguments"]) == arguments


def test_events_and_responses_both_ways_round_trip():
    event = {"seq": 9, "type": "event", "event": "breakpoint", "body": {
        "reason": "changed", "breakpoint": {"id": 1, "verified": True,
                                            "source": {"path": f"{REMOTE}/helper.py"}}}}
    local = PATHS.to_local(body(event))
    assert json.loads(local)["body"]["breakpoint"]["source"]["path"] == f"{LOCAL}/helper.py"
    assert json.loads(PATHS.to_remote(local)) == event


def test_messages_without_a_mapped_path_keep_their_bytes():
    for message in (b'{"seq":1,"type":"response","command":"threads","body":{}}',
                    body({"seq": 2, "type": "event", "event": "output",
                          "body": {"output": f"{REMOTE}/helper.py\n"}}),  # text, not a path
                    body({"seq": 3, "type": "response", "command": "stackTrace",
                          "body": {"stackFrames": [{"source": {"path": "/elsewhere/x.py"}}]}}),
                    b"not json but mentions \"path\" and " + REMOTE.encode()):
        assert PATHS.to_local(message) is message
        assert PATHS.to_remote(message) is message


def test_a_sibling_directory_with_the_same_prefix_is_not_under_the_root():
    assert PATHS.to_local_path(REMOTE + "-old/helper.py") == REMOTE + "-old/helper.py"
    assert PATHS.to_local_path(REMOTE) == LOCAL
    assert PathTranslator(REMOTE + "/", LOCAL + "/").to_local_path(f"{REMOTE}/a.py") == \
        f"{LOCAL}/a.py"


def test_a_windows_checkout():
    windows = PathTranslator(remote_root=REMOTE, local_root="C:\\Users\\me\\code")
    assert windows.to_local_path(f"{REMOTE}/pkg/helper.py") == "C:\\Users\\me\\code\\pkg\\helper.py"
    assert windows.to_remote_path("c:\\users\\me\\code\\pkg\\helper.py") == \
        f"{REMOTE}/pkg/helper.py"
    request = body({"seq": 1, "type": "request", "command": "source",
                    "arguments": {"source": {"path": "C:\\Users\\me\\code\\helper.py"}}})
    assert json.loads(windows.to_remote(request))["arguments"]["source"]["path"] == \
        f"{REMOTE}/helper.py"


def test_only_a_client_that_names_its_root_for_a_session_with_one_gets_a_translator():
    assert PathTranslator.for_attach({"raydebug": {"localRoot": LOCAL}}, REMOTE) == PATHS
    assert PathTranslator.for_attach({"raydebug": {"session": "x"}}, REMOTE) is None
    assert PathTranslator.for_attach({"raydebug": {"localRoot": LOCAL}}, None) is None
    assert PathTranslator.for_attach({"raydebug": "nonsense"}, REMOTE) is None


def test_the_module_is_sans_io():
    code = ("import sys, raydebug.protocol.paths; "
            "print(sorted({'socket', 'asyncio', 'ray'} & set(sys.modules)))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout
    assert out.strip() == "[]"


def test_escaped_and_non_ascii_paths():
    odd = f'{REMOTE}/we"ird\\name é.py'
    event = body({"seq": 1, "type": "event", "event": "loadedSource",
                  "body": {"reason": "new", "source": {"path": odd}}})
    assert b"\\u00e9" in event and b'\\"' in event  # as json.dumps escapes them
    moved = json.loads(PATHS.to_local(event))["body"]["source"]["path"]
    assert moved == f'{LOCAL}/we"ird\\name é.py'
    accented = PathTranslator(remote_root=REMOTE, local_root="/home/mé/code")
    for encoded in (json.dumps({"path": "/home/mé/code/a.py"}).encode(),  # \u00e9
                    json.dumps({"path": "/home/mé/code/a.py"}, ensure_ascii=False).encode()):
        assert json.loads(accented.to_remote(encoded)) == {"path": f"{REMOTE}/a.py"}
