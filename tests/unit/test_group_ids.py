"""A group session's ids: unique for the client, mapped back both ways, dropped when they die."""

from __future__ import annotations

import tracemalloc

import pytest

from raydebug.errors import UnknownIdError
from raydebug.protocol.group_ids import (
    FRAME,
    LARGEST_ID,
    SOURCE,
    THREAD,
    VARIABLES,
    GroupIds,
    LocalId,
)


def test_the_same_local_ids_of_two_processes_get_different_client_ids_mapped_back():
    ids = GroupIds()
    a_thread, b_thread = ids.thread_to_client("a", 1), ids.thread_to_client("b", 1)
    a_frame, b_frame = ids.ref_to_client(FRAME, "a", 7, 1), ids.ref_to_client(FRAME, "b", 7, 1)
    assert a_thread != b_thread and a_frame != b_frame
    assert ids.to_local(THREAD, b_thread) == LocalId(THREAD, "b", 1, 1)
    assert ids.to_local(FRAME, a_frame) == LocalId(FRAME, "a", 7, 1)
    # the same process id maps to the same client id while it lives
    assert ids.thread_to_client("a", 1) == a_thread
    assert ids.ref_to_client(FRAME, "a", 7, 1) == a_frame
    assert ids.ref_to_client(VARIABLES, "a", 0, 1) == 0  # DAP's "no reference" stays 0


def test_ids_are_in_daps_interval_and_start_again_past_the_largest():
    ids = GroupIds()
    kept = ids.ref_to_client(FRAME, "a", 1, 1)
    ids._ref_counter.given = LARGEST_ID - 1  # as after 2^31 references
    assert ids.ref_to_client(FRAME, "a", 2, 1) == LARGEST_ID
    assert ids.ref_to_client(FRAME, "a", 3, 1) == kept + 1  # 1 is still in use: skipped
    assert ids.to_local(FRAME, kept).local == 1


@pytest.mark.parametrize(("kind", "sent", "says"), [
    (FRAME, 99, "frameId 99 was never given"),
    (THREAD, "1", "threadId '1' is not a number"),
    (THREAD, True, "threadId True is not a number"),
    (VARIABLES, 1, "variablesReference 1 is a frameId, not a variablesReference"),
])
def test_an_id_the_map_does_not_hold_is_an_error_that_says_why(kind: str, sent: object,
                                                                 says: str):
    ids = GroupIds()
    ids.ref_to_client(FRAME, "a", 5, 1)
    with pytest.raises(UnknownIdError, match=says) as raised:
        ids.to_local(kind, sent)
    assert raised.value.kind == kind and raised.value.client_id == sent


def test_a_thread_that_runs_on_takes_its_frames_and_variables_not_its_sources():
    ids = GroupIds()
    frame_1 = ids.ref_to_client(FRAME, "a", 10, 1)
    variables_1 = ids.ref_to_client(VARIABLES, "a", 11, 1)
    frame_2 = ids.ref_to_client(FRAME, "a", 20, 2)
    source = ids.ref_to_client(SOURCE, "a", 1, None)
    other = ids.ref_to_client(FRAME, "b", 10, 1)
    ids.resumed("a", 1)  # a step of thread 1
    for kind, gone in ((FRAME, frame_1), (VARIABLES, variables_1)):
        with pytest.raises(UnknownIdError, match="no longer valid"):
            ids.to_local(kind, gone)
    assert ids.to_local(FRAME, frame_2).thread == 2
    ids.resumed("a")  # a continue of the whole process
    with pytest.raises(UnknownIdError):
        ids.to_local(FRAME, frame_2)
    assert ids.to_local(SOURCE, source).process == "a"
    assert ids.to_local(FRAME, other).process == "b"
    # after the resume the process's same number is a new object: a new client id
    assert ids.ref_to_client(FRAME, "a", 10, 1) not in (frame_1, frame_2)


def test_a_process_that_leaves_takes_every_id_with_it_and_names_its_threads():
    ids = GroupIds()
    threads = [ids.thread_to_client("a", local) for local in (1, 2)]
    kept = ids.thread_to_client("b", 1)
    frame = ids.ref_to_client(FRAME, "a", 3, 1)
    source = ids.ref_to_client(SOURCE, "a", 1, None)
    assert sorted(ids.left("a")) == threads
    for kind, gone in ((THREAD, threads[0]), (FRAME, frame), (SOURCE, source)):
        with pytest.raises(UnknownIdError, match="no longer valid"):
            ids.to_local(kind, gone)
    assert ids.to_local(THREAD, kept).process == "b"
    assert ids.left("a") == []
    assert ids.statistics() == {"processes": 1, "threads": 1, "references": 0, "evicted": 0}


def test_an_exited_thread_loses_its_id_and_its_references():
    ids = GroupIds()
    thread = ids.thread_to_client("a", 4)
    frame = ids.ref_to_client(FRAME, "a", 9, 4)
    assert ids.thread_exited("a", 4) == thread
    assert ids.thread_exited("a", 4) is None and ids.thread_exited("z", 1) is None
    assert ids.threads_of("a") == {}
    with pytest.raises(UnknownIdError):
        ids.to_local(FRAME, frame)


def test_memory_is_bounded_per_process_and_the_least_recently_used_goes_first():
    ids = GroupIds(max_threads=2, max_refs=3)
    first, second, third = (ids.ref_to_client(VARIABLES, "a", local, 1) for local in (1, 2, 3))
    ids.ref_to_client(VARIABLES, "a", 1, 1)  # used again: now the most recent
    ids.ref_to_client(VARIABLES, "a", 4, 1)
    with pytest.raises(UnknownIdError, match="no longer valid"):
        ids.to_local(VARIABLES, second)
    assert ids.to_local(VARIABLES, first).local == 1
    assert ids.to_local(VARIABLES, third).local == 3
    ids.ref_to_client(VARIABLES, "b", 1, 1)  # another process has a bound of its own
    for local in (1, 2, 3):
        ids.thread_to_client("a", local)
    assert list(ids.threads_of("a")) == [2, 3]
    assert ids.statistics()["evicted"] == 2


def test_a_stopped_process_costs_a_few_kilobytes_of_ids():
    # A paused Ray worker as an IDE shows it: 8 threads, one stack of 30 frames with two
    # scopes each and 100 variables open, 5 sources.
    ids = GroupIds()
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    for process in range(200):
        key = f"process-{process:04d}"
        for thread in range(1, 9):
            ids.thread_to_client(key, thread)
        for local in range(1, 31):
            ids.ref_to_client(FRAME, key, 1000 + local, 1)
        for local in range(1, 101):
            ids.ref_to_client(VARIABLES, key, 2000 + local, 1)
        for local in range(1, 6):
            ids.ref_to_client(SOURCE, key, local, None)
    per_process = (tracemalloc.get_traced_memory()[0] - before) / 200
    tracemalloc.stop()
    assert per_process < 50_000, per_process  # the budget for one process of a group

