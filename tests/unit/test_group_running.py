"""A group session's running live processes, in memory: their threads listed as running
threads from their agents' reports, a pause of one pauses its process, and when it pauses
its running threads give way to its debugger's."""

from __future__ import annotations

from group_pair import GroupPair, client_thread_ids, group, stopped

from raydebug.protocol import Event, Request
from raydebug.protocol.group_rewrite import Member

PAUSED = Member("p0", pid=4300, rank="0", task="train_step")
RUNNING = Member("p1", pid=4201, rank="1", task="train_step")
OTHER = Member("p2", pid=4500)


def running_group() -> tuple[GroupPair, dict[str, int]]:
    """``PAUSED`` joined and stopped; ``RUNNING`` running, its threads reported (MainThread,
    loader). Returns the pair and the client's ids of RUNNING's threads by name."""
    pair = group(PAUSED)
    assert pair.runs(RUNNING).asked_threads == ["p1"]
    started = pair.agent_reports("p1", "MainThread", "loader")
    assert [e.body["reason"] for e in started.events] == ["started", "started"]
    ids = [e.body["threadId"] for e in started.events]
    return pair, dict(zip(("MainThread", "loader"), ids, strict=True))


def threads_answer(pair: GroupPair, *running_report: str) -> list[dict[str, object]]:
    """One ``threads`` round: the joined processes answer MainThread, the running ones'
    agents report ``running_report``."""
    sent = pair.client_sends(pair.request("threads"))
    assert sent.responses == []  # it waits for every process, running ones included
    for key in sent.to_process:
        pair.process_sends(key, pair.answer(sent.requests_to(key)[0],
                                            threads=[{"id": 1, "name": "MainThread"}]))
    answers = [pair.agent_reports(key, *running_report).responses for key in sent.asked_threads]
    (answer,) = [response for responses in answers for response in responses]
    return list(answer.body["threads"])


def test_threads_lists_a_running_processs_threads_beside_the_paused_ones():
    pair, running = running_group()
    threads = threads_answer(pair, "MainThread", "loader")
    assert [t["name"] for t in threads] == [
        "rank 0 · train_step · pid 4300 · MainThread",
        "rank 1 · train_step · pid 4201 · MainThread",
        "rank 1 · train_step · pid 4201 · loader"]
    assert [t["id"] for t in threads][1:] == [running["MainThread"], running["loader"]]
    assert len({t["id"] for t in threads}) == 3  # ident 100 never meets pydevd's thread 1


def test_a_running_process_that_does_not_answer_keeps_its_last_report():
    pair, running = running_group()
    sent = pair.client_sends(pair.request("threads"))
    pair.process_sends("p0", pair.answer(sent.requests_to("p0")[0], threads=[]))
    (answer,) = pair.policy.running_threads("p1", None)  # no answer within the bound
    assert [t["id"] for t in answer.message.body["threads"]] == list(running.values())


def test_threads_that_start_or_end_between_reports_are_told_to_the_client():
    pair, running = running_group()
    changed = pair.agent_reports("p1", "MainThread", "saver")  # loader ended, saver started
    assert sorted((e.body["reason"], e.body["threadId"] == running["loader"])
                  for e in changed.events) == [("exited", True), ("started", False)]


def test_pause_on_a_running_thread_pauses_its_process_only():
    pair, running = running_group()
    pause = pair.request("pause", threadId=running["loader"])
    sent = pair.client_sends(pause)
    assert sent.paused_running == ["p1"] and sent.paused == [] and sent.to_process == {}
    assert [(r.request_seq, r.success) for r in sent.responses] == [(pause.seq, True)]


def test_a_running_thread_answers_what_needs_it_stopped_with_an_error_and_continue_succeeds():
    pair, running = running_group()
    trace = pair.client_sends(pair.request("stackTrace", threadId=running["MainThread"]))
    assert trace.to_process == {} and "pause it first" in trace.responses[0].message
    assert "(rank 1 · train_step · pid 4201 · MainThread)" in trace.responses[0].message
    (go,) = pair.client_sends(pair.request("continue", threadId=running["MainThread"],
                                           singleThread=True)).responses
    assert go.success and go.body == {"allThreadsContinued": False}


def test_a_running_process_that_pauses_joins_and_its_running_threads_exit():
    pair, running = running_group()
    owed = pair.client_sends(pair.request("threads"))  # its report not in yet
    joined = pair.join(RUNNING)
    exited = [e.body for e in joined.events]
    assert exited == [{"reason": "exited", "threadId": running["MainThread"]},
                      {"reason": "exited", "threadId": running["loader"]}]
    assert joined.responses == []  # the threads request still waits for p0
    (answer,) = pair.process_sends("p0", pair.answer(owed.requests_to("p0")[0], threads=[
        {"id": 1, "name": "MainThread"}])).responses
    assert len(answer.body["threads"]) == 1
    for request in joined.requests_to("p1"):
        pair.process_sends("p1", pair.answer(request))
    (stop,) = pair.process_sends("p1", stopped()).events
    assert stop.body["threadId"] not in running.values()
    assert "p1" not in pair.policy.running


def test_a_running_process_that_exits_leaves_with_thread_exited_events():
    pair, running = running_group()
    left = pair.process_leaves("p1")
    assert sorted(e.body["threadId"] for e in left.events) == sorted(running.values())
    assert "never given" not in pair.client_sends(pair.request(
        "pause", threadId=running["loader"])).responses[0].message


def test_continue_all_leaves_running_processes_alone():
    pair, _ = running_group()
    sent = pair.client_sends(pair.request("continue", threadId=client_thread_ids(pair)["p0"]))
    assert list(sent.to_process) == ["p0"] and sent.paused_running == []


def test_breakpoint_changes_reach_a_joined_process_now_or_after_its_attach():
    pair = group(PAUSED)
    change = Request(0, "setBreakpoints", {"source": {"path": "/a.py"},
                                           "breakpoints": [{"line": 9}]})
    (sent,) = pair.configure("p0", change).requests_to("p0")
    assert (sent.command, sent.arguments) == ("setBreakpoints", change.arguments)
    assert pair.process_sends("p0", pair.answer(sent)).to_client == []  # the hub's own
    initialize, attach = pair.join(OTHER).requests_to("p2")
    assert pair.configure("p2", change).to_process == {}  # not attached yet: queued
    pair.process_sends("p2", pair.answer(initialize))
    configured = pair.process_sends("p2", pair.answer(attach)).requests_to("p2")
    assert [r.command for r in configured] == ["setBreakpoints", "configurationDone"]
    assert pair.configure("p9", change).to_process == {}  # not in the group


def test_a_process_that_joins_while_running_is_not_listed_twice():
    pair = group(PAUSED)
    assert pair.runs(PAUSED).asked_threads == []
    assert pair.runs(RUNNING).asked_threads == ["p1"]
    assert pair.runs(RUNNING).asked_threads == []
    assert not isinstance(pair.policy.running_threads("p9", []), Event)


def test_with_pause_together_a_pause_of_any_thread_pauses_every_process_of_the_group():
    pair = GroupPair(pause_together=True)
    pair.join_set_up(PAUSED)
    pair.runs(RUNNING)
    (started, _) = pair.agent_reports("p1", "MainThread", "loader").events
    pause = pair.request("pause", threadId=started.body["threadId"])
    sent = pair.client_sends(pause)
    assert (sent.paused, sent.paused_running) == (["p0"], ["p1"])
    assert [(r.request_seq, r.success) for r in sent.responses] == [(pause.seq, True)]
    (refused,) = pair.client_sends(pair.request("pause", threadId=99)).responses
    assert not refused.success and "never given" in (refused.message or "")
