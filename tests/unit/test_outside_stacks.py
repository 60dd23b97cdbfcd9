"""``raydebug stacks --native``: py-spy's dump read into ``/api/stacks``' shape and merged
into the tree, py-spy run through a stand-in that returns what it was given."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from rich.console import Console

from devtools.stacks import frame, process
from raydebug.agent.own_frames import RAYDEBUG_DIR
from raydebug.outside_stacks import (
    Dump,
    Reading,
    failed,
    read_unanswered,
    threads_from_py_spy,
)
from raydebug.stack_tree import merge_stacks
from raydebug.views_processes import stacks_view

# `py-spy dump --json --native` of a linked process whose main thread holds its GIL in a
# regex (tests/integration/test_live_cli.py's busy.py): raydebug's link thread, then it.
RECORDED = (Path(__file__).parent / "samples" / "py_spy_dump_native.json").read_text()
DUMP: list[dict[str, Any]] = json.loads(RECORDED.replace("{raydebug}/", RAYDEBUG_DIR))
LIBPYTHON = "/root/.pyenv/versions/3.11.7/lib/libpython3.11.so.1.0"
HOST = "node-1"  # devtools.stacks.process's host


def answer_with_one_unanswered() -> dict[str, Any]:
    """rank 0 answered; rank 1 (pid 1001) did not."""
    entries = [process(0, [frame("main", 30, "spin()"), frame("spin", 12, "total += 1")]),
               process(1, answered=False, reason="no answer within 1s")]
    return {"processes": entries, "tree": merge_stacks(entries).to_dict()}


def recorded(py_spy: str, pid: int, timeout: float) -> Dump:
    assert (py_spy, pid) == ("/bin/py-spy", 1001) and timeout >= 1
    return Dump(threads=DUMP)


def test_a_dump_becomes_threads_outermost_first_without_raydebugs_own():
    (main,) = threads_from_py_spy(DUMP)  # the raydebug-link thread is left out
    assert (main["name"], main["owns_gil"], main["id"]) == ("MainThread", True, 140327667018624)
    assert [f["function"] for f in main["frames"]] == [
        "<module>", "loop", "match", "_sre_SRE_Pattern_match", "sre_ucs1_match"]  # no 0x...
    assert main["frames"][1] == {"file": "/jobs/busy.py", "function": "loop", "line": 7,
                                 "code": "", "native": False}
    assert main["frames"][-1] == {"file": LIBPYTHON, "function": "sre_ucs1_match", "line": 0,
                                  "code": "", "native": True}


def test_raydebugs_frames_on_top_of_a_users_thread_are_cut():
    """A user's thread raydebug holds (a pause): its stack ends at the user's frame."""
    held = {"thread_id": 7, "thread_name": "worker", "frames": [
        {"name": "pthread_cond_wait", "filename": "/lib/libc.so.6", "module": "/lib/libc.so.6",
         "line": 0},
        {"name": "Event.wait", "filename": "/usr/lib/python3.11/threading.py", "module": None,
         "line": 622},
        {"name": "stop_here", "filename": RAYDEBUG_DIR + "agent/pause_all.py", "module": None,
         "line": 80},
        {"name": "step", "filename": "/jobs/train.py", "module": None, "line": 12},
        {"name": "<module>", "filename": "/jobs/train.py", "module": None, "line": 20},
        {"name": "Py_RunMain", "filename": "/lib/libpython3.11.so",
         "module": "/lib/libpython3.11.so", "line": 0}]}
    (thread,) = threads_from_py_spy([held])  # nor the C frames outside the outermost Python one
    assert [f["function"] for f in thread["frames"]] == ["<module>", "step"]


def test_the_unanswered_process_of_this_machine_joins_the_tree_read_from_outside():
    answer, notice = read_unanswered(answer_with_one_unanswered(), 1.0, recorded,
                                     py_spy="/bin/py-spy", host=HOST)
    assert notice == ""
    entry = answer["processes"][1]
    assert entry["answered"] and entry["outside"] == "py-spy"
    tree = answer["tree"]
    assert tree["count"] == {"processes": 2, "threads": 2, "not_answering": 0,
                             "no_threads": 0, "outside": 1}
    busy = next(n for n in tree["root"]["children"] if n["file"] == "/jobs/busy.py")
    leaf = busy
    while leaf["children"]:
        leaf = leaf["children"][0]
    assert leaf["function"] == "sre_ucs1_match" and leaf["outside"] == ["p1001"]
    assert leaf["label"] == "1 process here: rank 1 (read from outside by py-spy)"
    spin = next(n for n in tree["root"]["children"] if n["function"] == "main")
    assert "outside" not in spin and "read from outside" not in spin["label"]


def test_the_view_marks_it_and_a_c_frame_has_no_line():
    answer, _ = read_unanswered(answer_with_one_unanswered(), 1.0, recorded,
                                py_spy="/bin/py-spy", host=HOST)
    console = Console(width=120, record=True, color_system=None)
    console.print(stacks_view(answer, 120))
    lines = console.export_text().splitlines()
    assert lines[0] == "2 processes, 1 read from outside"
    (c_frame,) = [line for line in lines if "sre_ucs1_match" in line]
    assert c_frame.split()[:3] == ["1", "│", "sre_ucs1_match"], c_frame
    assert "libpython3.11.so.1.0  ←" in c_frame and ".so.1.0:" not in c_frame, c_frame
    assert "(read from outside by py-spy)" in c_frame


def test_without_py_spy_one_line_says_so_and_the_answer_is_unchanged():
    before = answer_with_one_unanswered()

    def never(py_spy: str, pid: int, timeout: float) -> Dump:
        raise AssertionError("py-spy is not there to run")

    answer, notice = read_unanswered(before, 1.0, never, py_spy=None, host=HOST)
    assert answer == before
    assert notice == ("--native: py-spy is not installed here (pip install py-spy); "
                      "1 process left unread")


def test_without_ptrace_rights_one_line_says_what_to_do():
    def refused(py_spy: str, pid: int, timeout: float) -> Dump:
        return Dump(error="Error: Permission denied (os error 13)", permission=True)

    answer, notice = read_unanswered(answer_with_one_unanswered(), 1.0, refused,
                                     py_spy="/bin/py-spy", host=HOST)
    assert notice.startswith("--native: py-spy may not read pid 1001: run it as root")
    assert answer["tree"]["not_answering"][0]["reason"] == "no answer within 1s"


def test_a_process_py_spy_cannot_read_stays_apart_with_both_reasons():
    def gone(py_spy: str, pid: int, timeout: float) -> Dump:
        return Dump(error="Error: No such process (os error 3)")

    answer, notice = read_unanswered(answer_with_one_unanswered(), 1.0, gone,
                                     py_spy="/bin/py-spy", host=HOST)
    assert notice == ""
    (apart,) = answer["tree"]["not_answering"]
    assert apart["reason"] == "no answer within 1s; py-spy: Error: No such process (os error 3)"


def test_processes_of_other_machines_are_not_read_and_said_so():
    def never(py_spy: str, pid: int, timeout: float) -> Dump:
        raise AssertionError("py-spy reads this machine's processes only")

    before = answer_with_one_unanswered()
    answer, notice = read_unanswered(before, 1.0, never, py_spy="/bin/py-spy",
                                     host="another-host")
    assert answer == before
    assert notice == "1 process of other machines not read (py-spy reads this machine's)"


def test_several_are_read_each_once_and_a_record_without_pid_is_left_alone():
    entries = [process(rank, answered=False, reason="no answer within 1s")
               for rank in range(3)]
    entries[2]["process"]["pid"] = None
    asked: list[int] = []

    def each(py_spy: str, pid: int, timeout: float) -> Dump:
        asked.append(pid)
        return Dump(threads=DUMP)

    answer, notice = read_unanswered({"processes": entries}, 1.0, each,
                                     py_spy="/bin/py-spy", host=HOST)
    assert sorted(asked) == [1000, 1001] and notice == ""
    assert answer["tree"]["count"]["outside"] == 2
    assert len(answer["tree"]["not_answering"]) == 1


def test_what_a_failed_py_spy_said_is_its_error_line():
    """py-spy 0.4.3's stderr, recorded: as another user, then for a pid that is gone."""
    refused = failed("Permission Denied: Try running again with elevated permissions by "
                     "going 'sudo env \"PATH=$PATH\" !!'\n", 1)
    assert refused.permission and refused.error.startswith("Permission Denied: Try")
    gone = failed("Error: Failed to get process executable name. Check that the process is "
                  "running.\n\nCaused by:\n    0: No such file or directory (os error 2)\n"
                  "\nStack backtrace:\n   0: <E as anyhow::context::ext::StdError>::ext\n", 1)
    assert not gone.permission
    assert gone.error == ("Error: Failed to get process executable name. Check that the "
                          "process is running.")


def on_nodes(*entries: dict[str, Any]) -> dict[str, Any]:
    """Those ``entries`` (of other machines), each a Ray process of the node named by its
    rank: ``node-<rank>``."""
    for entry in entries:
        record = entry["process"]
        record.update(host="worker-host", node_id=f"node-{record['labels']['RANK']}" * 4,
                      node_ip=f"10.0.0.{record['labels']['RANK']}")
    return {"processes": list(entries), "tree": merge_stacks(list(entries)).to_dict()}


def test_a_ray_process_of_another_node_is_read_on_its_node():
    asked: list[tuple[dict[str, list[int]], float]] = []

    def nodes(pids: dict[str, list[int]], timeout: float) -> dict[str, Reading]:
        asked.append((pids, timeout))
        return {node: Reading({pid: Dump(threads=DUMP) for pid in node_pids})
                for node, node_pids in pids.items()}

    def never(py_spy: str, pid: int, timeout: float) -> Dump:
        raise AssertionError("a Ray process is read on its node, not here")

    before = on_nodes(*answer_with_one_unanswered()["processes"])
    answer, notice = read_unanswered(before, 1.0, never, py_spy="/bin/py-spy", host=HOST,
                                     nodes=nodes)
    assert notice == "" and asked == [({"node-1" * 4: [1001]}, 1.0)]
    entry = answer["processes"][1]
    assert entry["answered"] and entry["outside"] == "py-spy"
    assert entry["read_on"] == "node-1" * 4
    assert answer["tree"]["count"]["outside"] == 1


def test_each_node_that_cannot_read_says_why_in_one_line():
    """Without py-spy, without ptrace rights, its task failed: a line each, naming the
    node; the others read, and a process of no Ray node elsewhere counted as before."""
    entries = [process(rank, answered=False, reason="no answer within 1s")
               for rank in range(4)]
    answer = on_nodes(*entries[:3])
    answer["processes"].append({**entries[3], "process": {**entries[3]["process"],
                                                          "host": "elsewhere"}})
    readings = {"node-0" * 4: Reading(missing=True),
                "node-1" * 4: Reading({1001: Dump(error="Permission Denied",
                                                  permission=True)}),
                "node-2" * 4: Reading(failure="its task did not finish within 35 s")}

    answer, notice = read_unanswered(answer, 1.0, host=HOST,
                                     nodes=lambda pids, timeout: readings)
    assert notice.splitlines() == [
        "--native: py-spy is not installed on node 10.0.0.0 (node-0no) (pip install "
        "py-spy); 1 process left unread",
        "--native: py-spy may not read pid 1001 on node 10.0.0.1 (node-1no): Ray's workers "
        "there need CAP_SYS_PTRACE (Kubernetes: the pod's SYS_PTRACE capability), or "
        "kernel.yama.ptrace_scope 0",
        "--native: reading on node 10.0.0.2 (node-2no) failed (its task did not finish "
        "within 35 s); 1 process left unread",
        "1 process of other machines not read (py-spy reads this machine's)"]
    assert not any(entry["answered"] for entry in answer["processes"])


def test_a_reading_travels_as_json():
    reading = Reading({1001: Dump(threads=DUMP), 1002: Dump(error="gone")}, failure="")
    assert Reading.from_json(json.loads(json.dumps(reading.to_json()))) == reading
