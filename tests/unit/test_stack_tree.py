"""Stacks of many processes merged into one tree with counts (raydebug.stack_tree)."""

from __future__ import annotations

import json
from typing import Any

from devtools.stacks import JOB, frame, process
from raydebug.peer_groups import peer_group
from raydebug.stack_tree import (
    ProcessRef,
    describe_group,
    format_numbers,
    format_ranks,
    merge_stacks,
)

LOOPING = [frame("main", 30, "train()"), frame("train", 20, "step(batch)"),
           frame("step", 12, "total += x")]
BLOCKED = [frame("main", 30, "train()"), frame("train", 22, "lock.acquire()"),
           frame("wait", 5, "lock.acquire()", file="/usr/lib/threading.py")]


def test_identical_stacks_share_one_path_with_counts():
    tree = merge_stacks([process(rank, LOOPING) for rank in range(4)])
    (main,) = tree.root.children.values()
    assert (main.function, main.line, main.process_count()) == ("main", None, 4)
    (train,) = main.children.values()
    (step,) = train.children.values()
    assert step.is_leaf and (step.file, step.function, step.line) == (JOB, "step", 12)
    assert step.label() == "4 processes here: ranks 0-3"
    assert not any(node.odd for node in tree.root.walk())


def test_the_straggler_is_a_sibling_branch_marked_odd():
    tree = merge_stacks([process(0, LOOPING), process(1, BLOCKED), process(2, LOOPING),
                         process(3, LOOPING)])
    (main,) = tree.root.children.values()
    (train,) = main.children.values()  # inner frames merge on the function, not the line
    assert train.lines == {20, 22} and train.code_line() == ""
    step, wait = train.ordered_children()
    assert (step.function, step.process_count(), step.odd) == ("step", 3, False)
    assert (wait.function, wait.process_count(), wait.odd) == ("wait", 1, True)
    assert wait.label() == "1 process here: rank 1"
    assert step.code_line() == "total += x"


def test_stat_style_labels_for_big_and_small_groups():
    many = [process(rank, LOOPING) for rank in range(64) if rank not in (7, 19, 44)]
    odd = [process(rank, BLOCKED) for rank in (7, 19, 44)]
    tree = merge_stacks(many + odd)
    step, wait = tree.root.children[(JOB, "main", None)].children[
        (JOB, "train", None)].ordered_children()
    assert step.label() == "61 processes here: ranks 0-6, 8-18, 20-43, 45-63"  # short enough
    assert wait.odd and wait.label() == "3 processes here: ranks 7, 19, 44"
    scattered = [process(rank, LOOPING) for rank in range(0, 128, 2)]
    tree = merge_stacks(scattered + [process(rank, BLOCKED) for rank in (7, 19, 44)])
    step, wait = tree.root.children[(JOB, "main", None)].children[
        (JOB, "train", None)].ordered_children()
    assert step.label() == "64 processes here"  # naming them would not be short: the count
    assert wait.label() == "3 processes here: ranks 7, 19, 44"


def test_same_function_different_innermost_line_are_apart():
    at_12 = [frame("main", 30), frame("step", 12)]
    at_14 = [frame("main", 30), frame("step", 14)]
    tree = merge_stacks([process(r, at_12) for r in range(5)] + [process(5, at_14)])
    leaves = [node for node in tree.root.walk() if node.is_leaf]
    assert [(leaf.line, leaf.process_count(), leaf.odd) for leaf in leaves] == [
        (12, 5, False), (14, 1, True)]


def test_a_thread_in_a_function_and_one_calling_out_of_it_are_two_nodes():
    tree = merge_stacks([process(0, [frame("main", 3), frame("f", 7)]),
                         process(1, [frame("main", 3), frame("f", 5), frame("g", 1)])])
    main = tree.root.children[(JOB, "main", None)]
    assert sorted([(c.function, c.line) for c in main.children.values()], key=str) == [
        ("f", 7), ("f", None)]
    assert not any(c.odd for c in main.children.values())  # one against one: no minority


def test_threads_are_members_and_counts_say_threads_when_more_than_processes():
    idle = [frame("_bootstrap", 990, file="/usr/lib/threading.py"),
            frame("run", 950, file="/usr/lib/threading.py"),
            frame("wait", 320, file="/usr/lib/threading.py")]
    tree = merge_stacks([process(rank, LOOPING, idle, idle) for rank in range(2)])
    wait = next(n for n in tree.root.walk() if n.function == "wait")
    assert wait.process_count() == 2 and len(wait.members) == 4
    assert wait.label() == "2 processes here (4 threads): ranks 0, 1"
    assert tree.to_dict()["count"] == {"processes": 2, "threads": 6, "not_answering": 0,
                                       "no_threads": 0, "outside": 0}


def test_processes_that_did_not_answer_are_apart_with_their_reason():
    tree = merge_stacks([process(0, LOOPING),
                         process(3, answered=False, reason="no answer within 2 s"),
                         process(None, pid=77)])
    assert tree.root.process_count() == 1
    assert [(u.process.rank, u.reason) for u in tree.not_answering] == [
        (3, "no answer within 2 s")]
    assert [p.pid for p in tree.no_threads] == [77]
    data = tree.to_dict()
    assert data["not_answering"] == [{"process": "p1003", "pid": 1003, "host": "node-1",
                                      "rank": 3, "reason": "no answer within 2 s"}]
    assert data["count"]["not_answering"] == 1 and data["count"]["no_threads"] == 1


def test_ranks_and_numbers_are_compact():
    assert format_ranks([44, 7, 19]) == "ranks 7, 19, 44"
    assert format_ranks(range(6)) == "ranks 0-5"
    assert format_ranks([3]) == "rank 3"
    assert format_numbers([0, 1, 2, 3, 4, 5, 9, 11, 12, 20, 21, 22]) == "0-5, 9, 11, 12, 20-22"
    assert format_numbers([1, 1, 2]) == "1, 2"


def test_processes_without_a_rank_are_named_by_pid():
    refs = [ProcessRef("a", 4242, "h", None), ProcessRef("b", 17, "h", 2),
            ProcessRef("c", 4243, "h", None)]
    assert describe_group(refs, 3, name_them=True) == "3 processes: rank 2; pids 4242, 4243"
    many = [ProcessRef(f"p{i}", 5000 + 2 * i, "h", None) for i in range(40)]
    assert describe_group(many, 40) == "40 processes"  # too many pids to name them all


def test_to_dict_is_json_with_the_documented_shape():
    tree = merge_stacks([process(0, LOOPING), process(1, BLOCKED), process(2, LOOPING),
                         process(3, LOOPING)])
    data = json.loads(json.dumps(tree.to_dict()))
    assert data["version"] == 1 and data["count"]["processes"] == 4
    root = data["root"]
    assert (root["function"], root["line"], root["leaf"]) == ("", None, False)
    train = root["children"][0]["children"][0]
    assert train["lines"] == [20, 22] and train["code"] == ""
    step, wait = train["children"]
    assert step == {
        "function": "step", "file": JOB, "line": 12, "lines": [12], "code": "total += x",
        "leaf": True, "odd": False, "odd_among": [], "label": "3 processes here: ranks 0, 2, 3",
        "count": {"processes": 3, "threads": 3}, "processes": ["p1000", "p1002", "p1003"],
        "ranks": [0, 2, 3], "pids": [1000, 1002, 1003],
        "members": [{"process": f"p{pid}", "thread": 100, "name": "MainThread"}
                    for pid in (1000, 1002, 1003)],
        "children": []}
    assert wait["odd"] and wait["odd_among"] == ["ranks"] and wait["ranks"] == [1]
    # the same input gives the same JSON, whatever the order the processes came in
    shuffled = merge_stacks([process(3, LOOPING), process(1, BLOCKED), process(0, LOOPING),
                             process(2, LOOPING)]).to_dict()
    assert json.dumps(shuffled["root"]["children"][0]["children"][0]["children"][1]) == \
        json.dumps(wait)


def test_locals_are_counted_per_value_and_bounded():
    stacks = [process(rank, [frame("main", 3), frame("step", 12, i=str(rank % 2), x="'a'")])
              for rank in range(5)]
    step = merge_stacks(stacks).to_dict()["root"]["children"][0]["children"][0]
    assert step["locals"] == {"i": [{"value": "0", "threads": 3}, {"value": "1", "threads": 2}],
                              "x": [{"value": "'a'", "threads": 5}]}
    wide = [process(rank, [frame("step", 12, **{f"v{n}": str(rank) for n in range(30)})])
            for rank in range(10)]
    bounded = merge_stacks(wide).to_dict()["root"]["children"][0]["locals"]
    assert len(bounded) == 20 and all(len(values) == 5 for values in bounded.values())


def test_a_thread_without_frames_and_odd_share_is_a_parameter():
    tree = merge_stacks([process(0, []), process(1, LOOPING), process(2, LOOPING)],
                        odd_share=0.5)
    empty = tree.root.children[("", "(no Python frame)", 0)]
    assert empty.is_leaf and empty.odd  # 1 of 3 with a share of one half
    assert merge_stacks([process(0, []), process(1, LOOPING), process(2, LOOPING)],
                        odd_share=0.2).to_dict()["root"]["children"][1]["odd"] is False


# A Ray job as `raydebug stacks` sees it: its driver waiting in ray.get, an idle worker in
# Ray's main loop, and four `shard` tasks, three waiting where they should, one stuck.
RAY_WORKER = "/venv/lib/python3.12/site-packages/ray/_private/workers/default_worker.py"
RAY_LOOP = "/venv/lib/python3.12/site-packages/ray/_private/worker.py"
DRIVER_STACK = [frame("<module>", 44, "run()"), frame("run", 40, "ray.get(refs)"),
                frame("get", 2771, file=RAY_LOOP)]
IDLE_STACK = [frame("<module>", 290, file=RAY_WORKER), frame("main_loop", 946, file=RAY_LOOP)]
WAITING_TASK = [*IDLE_STACK, frame("shard", 12, "wait_for_the_others(i)"),
                frame("wait_for_the_others", 8, "time.sleep(600)")]
STUCK_TASK = [*IDLE_STACK, frame("shard", 14, "lock.acquire()"),
              frame("wait", 320, file="/usr/lib/threading.py")]


def ray_process(pid: int, stack: list[dict[str, Any]], task: str | None = None,
                worker: bool = True) -> dict[str, Any]:
    """One /api/stacks entry of a Ray job's driver (``worker`` false) or worker."""
    argv = [RAY_WORKER, "--node-ip-address=10.0.0.1"] if worker else ["job.py"]
    record = {"id": f"p{pid}", "pid": pid, "host": "node-1", "labels": {}, "argv": argv,
              "worker_id": f"w{pid}", "job_id": "01000000", "task_name": task,
              "actor_class": None}
    return {"process": record, "answered": True, "reason": None,
            "threads": [{"id": 1, "name": "MainThread", "daemon": False, "frames": stack}]}


def test_only_the_stuck_task_is_odd_not_the_driver_nor_an_idle_worker():
    tree = merge_stacks([ray_process(10, DRIVER_STACK, worker=False),
                         ray_process(20, IDLE_STACK),
                         *[ray_process(pid, WAITING_TASK, "shard") for pid in (31, 32, 33)],
                         ray_process(34, STUCK_TASK, "shard")])
    odd = [node for node in tree.root.walk() if node.odd]
    assert [(node.function, [p.pid for p in node.processes()]) for node in odd] == [
        ("wait", [34])], [
        (node.function, node.odd_among) for node in odd]
    assert odd[0].odd_among == ["task shard of job 01000000"]
    assert odd[0].label() == "1 process here: pid 34"


def test_a_task_of_another_name_is_not_odd_among_these():
    other = [*IDLE_STACK, frame("straggler", 20, "never.wait(0.05)")]
    tree = merge_stacks([*[ray_process(pid, WAITING_TASK, "shard") for pid in range(30, 37)],
                         ray_process(37, other, "straggler")])
    assert not [node.function for node in tree.root.walk() if node.odd]


def test_peer_groups_are_named_as_a_user_reads_them():
    worker = {"argv": [RAY_WORKER], "worker_id": "w", "job_id": "02000000"}
    assert peer_group({**worker, "task_name": "shard"}) == "task shard of job 02000000"
    assert peer_group({**worker, "task_name": "Trainer.step", "actor_class": "Trainer"}) == \
        "actor method Trainer.step of job 02000000"
    assert peer_group({**worker, "actor_class": "Trainer"}) == \
        "idle actors Trainer of job 02000000"
    assert peer_group(worker) == "idle Ray workers of job 02000000"
    assert peer_group({"argv": ["job.py"], "worker_id": "w"}) == "driver"
    assert peer_group({"labels": {"RANK": "3", "LOCAL_RANK": "1"}}) == "ranks"
    assert peer_group({"argv": ["/srv/prep.py", "--n", "4"], "parent": "p7"}) == \
        "command prep.py under p7"
    assert peer_group({}) == "processes"
