"""What ``raydebug ps`` and ``raydebug stacks`` render, at 120, 80 and 60 columns."""

from __future__ import annotations

from typing import Any

import pytest
from rich.console import Console

from devtools.stacks import frame, process
from raydebug.stack_tree import merge_stacks
from raydebug.views_processes import brief_process, processes_table, stacks_view

THREADING = "/usr/lib/python3.11/threading.py"
DATA = "/srv/project/with/a/rather/long/directory/name/data_loading.py"
IDLE = [frame("_bootstrap", 990, "self._bootstrap_inner()", file=THREADING),
        frame("run", 950, "self._target(*self._args, **self._kwargs)", file=THREADING),
        frame("wait", 320, "waiter.acquire()", file=THREADING, timeout="None")]
LOOPING = [frame("main", 30, "train()"), frame("train", 20, "step(batch)"),
           frame("step", 12, "total += x", total=str(10**40))]
STUCK = [frame("main", 30, "train()"), frame("train", 22, "load()"),
         frame("helper", 5, "queue.get()", file=DATA, timeout="None")]


def render(renderable: object, width: int, colour: bool = False) -> str:
    console = Console(width=width, record=True, color_system="standard" if colour else None,
                      force_terminal=colour)
    console.print(renderable)
    return console.export_text(styles=colour)


def sixty_four_ranks() -> dict[str, Any]:
    answers = [process(rank, STUCK if rank in (7, 19, 44) else LOOPING, IDLE)
               for rank in range(64)]
    answers.append(process(99, answered=False,
                           reason="no answer within 2 s (its GIL may be held by C code)"))
    return {"tree": merge_stacks(answers).to_dict()}


@pytest.mark.parametrize("width", [80, 60])
def test_a_long_reason_for_not_answering_wraps_at_words_whole(width: int):
    """`stacks --native`'s reasons (py-spy's, a node's) are sentences that say what to do:
    cut at the terminal's width, their second half was lost."""
    reason = ("py-spy could not read it: Permission denied (os error 13); run as the "
              "process's user, or allow ptrace (kernel.yama.ptrace_scope=0)")
    answers = [process(1, LOOPING, IDLE), process(2, answered=False, reason=reason)]
    text = render(stacks_view({"tree": merge_stacks(answers).to_dict()}, width), width)
    lines = text.rstrip("\n").splitlines()
    assert all(len(line) <= width for line in lines), text
    start = lines.index("did not answer: 1 process: rank 2:")
    assert " ".join(line.strip() for line in lines[start + 1:]) == reason, text


@pytest.mark.parametrize("width", [120, 80, 60])
def test_stacks_fit_the_terminal_and_set_the_stragglers_apart(width: int):
    text = render(stacks_view(sixty_four_ranks(), width, hub="127.0.0.1:5678"), width)
    lines = text.rstrip("\n").splitlines()
    assert all(len(line) <= width for line in lines), text
    assert lines[0].startswith("64 processes (128 threads), 1 did not answer"), text
    step = next(i for i, line in enumerate(lines) if "step" in line)
    helper = next(i for i, line in enumerate(lines) if "helper" in line)
    assert lines[step].split()[0] == "61" and lines[helper].split()[0] == "3", text
    assert "├ step" in lines[step] and "└ helper" in lines[helper], text  # one split, two ways
    assert "data_loading.py:5" in lines[helper], text  # the path gives way, not the file name
    assert "← 3 processes here: ranks 7, 19, 44" in "\n".join(lines[helper:helper + 2]), text
    assert "← 61 processes here" in "\n".join(lines[step:step + 2]), text
    assert any(line.startswith("did not answer: 1 process: rank 99") for line in lines), text
    assert "no answer within 2 s" in text, text
    assert "timeout = None" not in text  # locals only when asked
    # the common chain does not indent: main and train at the same column
    main = next(line for line in lines if " main " in line)
    train = next(line for line in lines if " train " in line)
    assert main.index("main") == train.index("train"), text


@pytest.mark.parametrize("width", [120, 80, 60])
def test_locals_show_under_their_frames_bounded_to_the_width(width: int):
    text = render(stacks_view(sixty_four_ranks(), width, with_locals=True), width)
    lines = text.rstrip("\n").splitlines()
    assert all(len(line) <= width for line in lines), text
    helper = next(i for i, line in enumerate(lines) if "helper" in line)
    assert "timeout = None" in "\n".join(lines[helper:helper + 3]), text
    total = next(line for line in lines if "total = " in line)
    assert total.rstrip().endswith(("0", "…")), text


def test_the_odd_group_is_highlighted():
    text = render(stacks_view(sixty_four_ranks(), 120), 120, colour=True)
    helper = next(line for line in text.splitlines() if "helper" in line)
    step = next(line for line in text.splitlines() if "step  /srv" in line)
    assert "\x1b[1;31m" in helper and "\x1b[31m" in helper, repr(helper)  # red count, red text
    assert "\x1b[31m" not in step, repr(step)


def test_an_empty_answer_says_so():
    text = render(stacks_view({"tree": merge_stacks([]).to_dict()}, 200, hub="h:1"), 200)
    assert text.strip() == ("no live processes on the hub at h:1: processes link when started "
                            "under `raydebug run` or with RAYDEBUG_LIVE=1; `raydebug link "
                            "pid=N` links one that runs")


PROCESSES = [
    {"id": "p3f9c2a1b", "pid": 18321, "host": "head", "argv": ["python", "train.py", "--x"],
     "state": "running", "sessions": [], "labels": {"RANK": "0", "WORLD_SIZE": "2"},
     "since": 1000.0, "parent": None, "job_id": None, "node_id": None, "node_ip": None,
     "worker_id": None, "actor_class": None, "task_name": None},
    {"id": "p3f9c2a1c", "pid": 18322, "host": "head", "argv": ["python", "train.py", "--x"],
     "state": "paused", "sessions": ["9183533b7182"], "labels": {"RANK": "1",
                                                                 "WORLD_SIZE": "2"},
     "since": 1010.0, "parent": None, "job_id": None, "node_id": None, "node_ip": None,
     "worker_id": None, "actor_class": None, "task_name": None},
]
RAY_PROCESSES = [
    {**PROCESSES[0], "labels": {}, "argv": ["/venv/bin/python", "-u", "default_worker.py"],
     "job_id": "01000000", "node_ip": "10.0.0.7", "node_id": "ab12" * 14,
     "worker_id": "cd34" * 14, "task_name": "preprocess"},
    {**PROCESSES[1], "labels": {}, "argv": ["/venv/bin/python", "-u", "default_worker.py"],
     "job_id": "02000000", "node_ip": "10.0.0.8", "node_id": "ef56" * 14,
     "worker_id": "ab78" * 14, "actor_class": "Trainer", "task_name": "Trainer.step"},
]


@pytest.mark.parametrize("width", [120, 80, 60])
@pytest.mark.parametrize("processes", [PROCESSES, RAY_PROCESSES], ids=["plain", "ray"])
def test_ps_is_one_line_per_process_that_fits(width: int, processes: list[dict[str, Any]]):
    text = render(processes_table(processes, now=1075.0, width=width, hub="127.0.0.1:5678"),
                  width)
    lines = text.rstrip("\n").splitlines()
    assert len(lines) == 2 + len(processes), text
    assert all(len(line.rstrip()) <= width for line in lines), text
    assert lines[0].rstrip() == "2 live processes on the hub at 127.0.0.1:5678, 1 paused"
    header = lines[1].split()
    assert header[:2] == ["id", "pid"] and "state" in header, text
    for record, line in zip(processes, lines[2:], strict=True):
        assert record["id"] in line and str(record["pid"]) in line, text
        assert record["state"] in line, text
    if processes is RAY_PROCESSES:
        assert "rank" not in header and "task" in header, text  # empty for every process
        assert "preprocess" in lines[2] and "Trainer.st" in lines[3], text
        if width >= 80:
            assert "job" in header and "10.0.0.7" in lines[2], text
    else:
        assert "rank" in header and "task" not in header, text
        if width >= 120:
            assert "WORLD_SIZE=2" in lines[2] and "python train.py --x" in lines[2], text
    if width >= 80:
        assert "9183533b7182" in lines[3] and "1m15s" in lines[2], text


def test_ps_marks_a_task_that_is_an_earlier_answer():
    stale = [RAY_PROCESSES[0], {**RAY_PROCESSES[1], "activity_stale": True}]
    lines = render(processes_table(stale, now=1075.0, width=120), 120).splitlines()
    assert lines[0].endswith("; * = last answer (1)")
    assert " preprocess " in lines[2] and " *Trainer.step " in lines[3], lines


def test_ps_with_nothing_linked_says_how_processes_link():
    text = render(processes_table([], hub="127.0.0.1:5678", found_by="--hub"), 200)
    assert text.strip() == ("no live processes on the hub at 127.0.0.1:5678 (--hub): "
                            "processes link when started under `raydebug run` or with "
                            "RAYDEBUG_LIVE=1; `raydebug link pid=N` links one that runs")


def test_a_brief_line_per_process_for_error_messages():
    assert brief_process(PROCESSES[1]) == \
        "p3f9c2a1c pid 18322 on head paused RANK=1 WORLD_SIZE=2"
    assert brief_process(RAY_PROCESSES[1]) == \
        "p3f9c2a1c pid 18322 on 10.0.0.8 paused task=Trainer.step actor=Trainer"


def test_selector_terms_travel_as_the_hubs_query():
    from raydebug.client.hub_api import processes_path, selector_query

    assert selector_query([]) == ""
    assert selector_query(["rank=0-3", "host=node 2"], locals="1") == \
        "?rank=0-3&host=node+2&locals=1"
    assert selector_query(["RAYDEBUG_LABEL=a=b"]) == "?RAYDEBUG_LABEL=a%3Db"
    assert processes_path(["task=f"], now=False) == "/api/processes?task=f&now=0"
    assert processes_path(["rank=1"], full_argv=True) == "/api/processes?rank=1&argv=1"


def test_a_ray_worker_s_command_is_not_the_start_of_a_long_path():
    """Ray starts every worker as `.../ray/_private/workers/default_worker.py --node-ip-...`:
    cut at the column's width that is the same useless prefix on every line."""
    worker = {"id": "p2", "pid": 11415, "node_ip": "127.0.0.1", "state": "running",
              "task_name": "stuck", "argv": [
                  "/work/venv/lib/python3.11/site-packages/ray/_private/workers/"
                  "default_worker.py", "--node-ip-address=127.0.0.1", "--worker-id=7386"]}
    driver = {"id": "p1", "pid": 11274, "node_ip": "127.0.0.1", "state": "running",
              "argv": ["/srv/project/jobs/train.py", "--epochs", "3"]}
    for width in (120, 60):
        text = render(processes_table([driver, worker], width=width), width)
        rows = text.splitlines()[2:]
        assert rows[1].rstrip().endswith("ray worker"), text
        assert "site-packages" not in text, text
        assert "train.py" in rows[0], text  # the script's name before its directory


def test_the_hub_s_banner_says_how_processes_link_for_ps():
    """A newcomer exports what `raydebug hub` prints; a hang then needs `ps` and `pause`,
    which list only processes started with RAYDEBUG_LIVE=1."""
    from raydebug.views import hub_banner

    banner = hub_banner("127.0.0.1:5678", "127.0.0.1:5679", "tok")
    assert banner.splitlines()[0] == "raydebug hub ready: clients 127.0.0.1:5678 agents " \
                                     "127.0.0.1:5679"
    assert "RAYDEBUG_LIVE=1" in banner and "raydebug ps" in banner
