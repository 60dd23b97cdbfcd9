"""A group session in memory: one client, many processes' debuggers, each request answered
once, every id the client sees the group's and every id a process sees its own."""

from __future__ import annotations

import subprocess
import sys

from group_pair import GroupPair, client_thread_ids, group, stopped

from raydebug.protocol import Event, Request, Response
from raydebug.protocol.group_policy import PROCESS_LEFT
from raydebug.protocol.group_rewrite import Member
from raydebug.protocol.paths import PathTranslator
from raydebug.protocol.proxy_policy import CLIENT_PAUSE_WAIT

RANK_1 = Member("p1", pid=4201, rank="1", task="train_step")
RANK_0 = Member("p0", pid=4300, rank="0", task="train_step")
UNRANKED = Member("px", pid=77)


def test_a_joining_process_is_set_up_by_the_hub_and_its_agent_told_when_configured():
    pair = GroupPair()
    breakpoints = Request(0, "setBreakpoints", {"source": {"path": "/a.py"},
                                                "breakpoints": [{"line": 3}]})
    joined = pair.join(RANK_0, configuration=[breakpoints])
    initialize, attach = joined.requests_to("p0")
    assert [(r.seq, r.command) for r in (initialize, attach)] == [(1, "initialize"), (2, "attach")]
    assert pair.process_sends("p0", pair.answer(initialize)).to_process == {}
    configured = pair.process_sends("p0", pair.answer(attach))
    assert [(r.seq, r.command, r.arguments) for r in configured.requests_to("p0")] == [
        (3, "setBreakpoints", breakpoints.arguments), (4, "configurationDone", {})]
    done = pair.process_sends("p0", pair.answer(configured.requests_to("p0")[0]),
                              pair.answer(configured.requests_to("p0")[1]),
                              Event(9, "initialized"))
    assert done.ready == ["p0"] and done.to_client == []  # the hub's own: never the client's


def test_a_debugger_that_refuses_its_set_up_is_told_on_the_clients_console():
    pair = GroupPair()
    initialize, attach = pair.join(RANK_1).requests_to("p1")
    pair.process_sends("p1", pair.answer(initialize))
    refused = pair.process_sends("p1", pair.answer(attach, success=False, message="busy"))
    assert refused.to_process == {} and refused.ready == []
    assert [e.body for e in refused.events] == [
        {"category": "console", "output": "[rank 1 pid 4201] attach failed: busy\n"}]


def test_threads_is_one_answer_naming_every_process_sorted_by_rank_then_pid():
    pair = group(UNRANKED, RANK_1, RANK_0)
    threads = pair.request("threads")
    sent = pair.client_sends(threads)
    assert sorted(sent.to_process) == ["p0", "p1", "px"] and sent.to_client == []
    answers = {key: pair.answer(sent.requests_to(key)[0], threads=[
        {"id": 1, "name": "MainThread"}, {"id": 2, "name": "worker"}]) for key in sent.to_process}
    assert pair.process_sends("p1", answers["p1"]).to_client == []  # still owed by two
    assert pair.process_sends("px", answers["px"]).to_client == []
    (answer,) = pair.process_sends("p0", answers["p0"]).responses
    assert answer.request_seq == threads.seq and answer.success
    names = [thread["name"] for thread in answer.body["threads"]]
    assert names == ["rank 0 · train_step · pid 4300 · MainThread",
                     "rank 0 · train_step · pid 4300 · worker",
                     "rank 1 · train_step · pid 4201 · MainThread",
                     "rank 1 · train_step · pid 4201 · worker",
                     "pid 77 · MainThread", "pid 77 · worker"]
    ids = [thread["id"] for thread in answer.body["threads"]]
    assert len(set(ids)) == 6  # six threads, all numbered 1 or 2 by their processes


def test_a_threads_ids_frames_variables_and_sources_reach_only_their_process():
    pair = group(RANK_0, RANK_1)
    thread = client_thread_ids(pair)["p1"]
    trace = pair.client_sends(pair.request("stackTrace", threadId=thread, levels=20))
    (request,) = trace.requests_to("p1")
    assert "p0" not in trace.to_process and request.arguments["threadId"] == 1
    frames = [{"id": 1, "name": "f", "line": 3, "source": {"path": "/a.py"}},
              {"id": 2, "name": "<string>", "line": 1, "source": {"sourceReference": 1}}]
    (answer,) = pair.process_sends("p1", pair.answer(request, stackFrames=frames)).responses
    top, generated = answer.body["stackFrames"]
    assert top["source"] == {"path": "/a.py"} and generated["name"] == "<string>"

    scopes = pair.client_sends(pair.request("scopes", frameId=top["id"])).requests_to("p1")
    assert scopes[0].arguments == {"frameId": 1}
    (answer,) = pair.process_sends("p1", pair.answer(scopes[0], scopes=[
        {"name": "Locals", "variablesReference": 1, "expensive": False}])).responses
    (scope,) = answer.body["scopes"]
    variables = pair.client_sends(pair.request("variables", variablesReference=scope[
        "variablesReference"])).requests_to("p1")
    assert variables[0].arguments == {"variablesReference": 1}
    evaluate = pair.client_sends(pair.request("evaluate", expression="os.getpid()",
                                              frameId=top["id"])).requests_to("p1")
    assert evaluate[0].arguments == {"expression": "os.getpid()", "frameId": 1}
    reference = generated["source"]["sourceReference"]
    source = pair.client_sends(pair.request("source", source={"sourceReference": reference},
                                            sourceReference=reference)).requests_to("p1")
    assert source[0].arguments == {"source": {"sourceReference": 1}, "sourceReference": 1}


def test_an_id_the_group_does_not_hold_is_answered_with_an_error_and_sent_nowhere():
    pair = group(RANK_0)
    for request in (pair.request("stackTrace", threadId=999),
                    pair.request("scopes", frameId=12345),
                    pair.request("variables", variablesReference="1"),
                    pair.request("evaluate", expression="x")):
        sent = pair.client_sends(request)
        (answer,) = sent.responses
        assert sent.to_process == {} and not answer.success
        assert answer.request_seq == request.seq and answer.message
    assert "never given" in pair.client_sends(pair.request("next", threadId=7)).responses[
        0].message


def test_continue_resumes_every_paused_process_and_is_answered_once():
    members = [Member(f"p{rank}", pid=5000 + rank, rank=str(rank)) for rank in range(12)]
    pair = group(*members)
    frame = _a_frame_of(pair, "p3")
    go = pair.request("continue", threadId=client_thread_ids(pair)["p0"])
    sent = pair.client_sends(go)
    assert sorted(sent.to_process) == sorted(member.key for member in members)
    assert all(r.arguments == {"threadId": 1} for key in sent.to_process
               for r in sent.requests_to(key))
    answers = [pair.process_sends(key, pair.answer(sent.requests_to(key)[0],
                                                   allThreadsContinued=True))
               for key in sorted(sent.to_process)[:-2]]
    assert all(a.to_client == [] for a in answers)
    assert pair.process_leaves("p9").responses == []  # one process left mid-request
    (answer,) = pair.process_sends("p8", pair.answer(sent.requests_to("p8")[0])).responses
    assert (answer.request_seq, answer.success, answer.body) == (
        go.seq, True, {"allThreadsContinued": True})
    # the frames of a process that ran on are no longer valid
    refused = pair.client_sends(pair.request("scopes", frameId=frame))
    assert refused.to_process == {} and "no longer valid" in refused.responses[0].message
    # nothing is paused now: the next continue is answered at once
    (again,) = pair.client_sends(pair.request("continue", threadId=1)).responses
    assert again.success and again.body == {"allThreadsContinued": True}


def test_a_single_thread_continue_and_a_step_move_only_that_threads_process():
    pair = group(RANK_0, RANK_1)
    threads = client_thread_ids(pair)
    kept = _a_frame_of(pair, "p0")
    moved = _a_frame_of(pair, "p1")
    step = pair.client_sends(pair.request("next", threadId=threads["p1"]))
    assert list(step.to_process) == ["p1"] and step.requests_to("p1")[0].arguments == {
        "threadId": 1}
    assert pair.process_sends("p1", pair.answer(step.requests_to("p1")[0])).responses[0].success
    assert "no longer valid" in pair.client_sends(pair.request(
        "scopes", frameId=moved)).responses[0].message
    assert list(pair.client_sends(pair.request("scopes", frameId=kept)).to_process) == ["p0"]
    single = pair.client_sends(pair.request("continue", threadId=threads["p0"],
                                            singleThread=True))
    (request,) = single.requests_to("p0")
    assert list(single.to_process) == ["p0"] and request.arguments["singleThread"] is True
    (answer,) = pair.process_sends("p0", pair.answer(request, allThreadsContinued=True)).responses
    assert answer.body == {"allThreadsContinued": False}  # the group's other process is paused


def test_pause_is_answered_by_the_hub_and_made_by_the_threads_process_agent():
    pair = group(RANK_0, RANK_1)
    pause = pair.request("pause", threadId=client_thread_ids(pair)["p1"])
    sent = pair.client_sends(pause)
    assert sent.to_process == {} and sent.paused == ["p1"]
    assert [(r.request_seq, r.success) for r in sent.responses] == [(pause.seq, True)]
    assert pair.policy.statistics()["asked"] == 0 and CLIENT_PAUSE_WAIT > 0


def test_events_carry_the_groups_thread_ids_and_speak_for_the_whole_group():
    pair = GroupPair()
    pair.join_set_up(RANK_0, RANK_1)
    (first,) = pair.process_sends("p0", stopped(allThreadsStopped=True)).events
    assert first.body["allThreadsStopped"] is False  # rank 1 still runs
    (second,) = pair.process_sends("p1", stopped(allThreadsStopped=True)).events
    assert second.body["allThreadsStopped"] is True
    assert first.body["threadId"] != second.body["threadId"]
    (continued,) = pair.process_sends("p0", Event(6, "continued", {"threadId": 1})).events
    assert continued.body == {"threadId": first.body["threadId"], "allThreadsContinued": False}
    started = pair.process_sends("p1", Event(7, "thread", {"reason": "started", "threadId": 8}))
    exited = pair.process_sends("p1", Event(8, "thread", {"reason": "exited", "threadId": 8}))
    assert started.events[0].body["threadId"] == exited.events[0].body["threadId"]
    for event in ("initialized", "terminated", "exited", "module", "breakpoint", "process"):
        assert pair.process_sends("p1", Event(9, event, {"exitCode": 0})).to_client == []


def test_a_process_that_leaves_answers_what_it_owed_and_its_ids_go_with_it():
    pair = group(RANK_0, RANK_1)
    thread = client_thread_ids(pair)["p1"]
    trace = pair.request("stackTrace", threadId=thread)
    step = pair.request("stepIn", threadId=thread)
    pair.client_sends(trace)
    pair.client_sends(step)
    left = pair.process_leaves("p1")
    assert [(r.request_seq, r.success, r.message) for r in left.responses] == [
        (trace.seq, False, PROCESS_LEFT), (step.seq, True, None)]
    assert [(e.event, e.body) for e in left.events] == [
        ("thread", {"reason": "exited", "threadId": thread})]
    later = pair.client_sends(pair.request("stackTrace", threadId=thread))
    assert later.to_process == {} and "no longer valid" in later.responses[0].message
    assert pair.process_sends("p1", stopped()).to_client == []  # late words are dropped
    assert pair.policy.statistics()["joined"] == 1


def test_threads_names_no_thread_of_a_process_that_left_or_could_not_answer():
    pair = group(RANK_0, RANK_1, UNRANKED)
    sent = pair.client_sends(pair.request("threads"))
    pair.process_sends("p0", pair.answer(sent.requests_to("p0")[0],
                                         threads=[{"id": 1, "name": "MainThread"}]))
    exited = pair.process_leaves("p0")  # after answering: its threads have exited
    assert [e.body["reason"] for e in exited.events] == ["exited"] and not exited.responses
    pair.process_sends("px", pair.answer(sent.requests_to("px")[0], success=False,
                                         message="busy"))
    (answer,) = pair.process_sends("p1", pair.answer(sent.requests_to("p1")[0], threads=[
        {"id": 1, "name": "MainThread"}])).responses
    assert [t["name"] for t in answer.body["threads"]] == [
        "rank 1 · train_step · pid 4201 · MainThread"]


def test_the_group_sessions_own_requests_are_the_hubs_and_reverse_requests_are_refused():
    pair = group(RANK_0)
    for command in ("initialize", "attach", "setBreakpoints", "configurationDone",
                    "terminate"):
        request = pair.request(command)
        assert pair.client_sends(request).hub_answers == [request]
    (refused,) = pair.process_sends("p0", Request(4, "runInTerminal", {"args": ["sh"]})) \
        .to_process["p0"]
    assert isinstance(refused, Response) and not refused.success and refused.request_seq == 4
    (answer,) = pair.client_sends(pair.request("modules")).responses
    assert not answer.success and "not served in a group session" in (answer.message or "")


def test_disconnect_lets_every_process_run_on_and_is_answered_once():
    pair = group(RANK_0, RANK_1)
    bye = pair.request("disconnect", terminateDebuggee=True)
    sent = pair.client_sends(bye)
    assert {key: [r.arguments for r in sent.requests_to(key)] for key in sent.to_process} == {
        "p0": [{"terminateDebuggee": False}], "p1": [{"terminateDebuggee": False}]}
    assert pair.process_sends("p0", pair.answer(sent.requests_to("p0")[0])).to_client == []
    (answer,) = pair.process_sends("p1", pair.answer(sent.requests_to("p1")[0], success=False,
                                                     message="gone")).responses
    assert answer.request_seq == bye.seq and answer.success


def test_a_local_root_translates_each_processs_paths_both_ways():
    pair = GroupPair()
    shipped = "/tmp/ray/session_1/runtime_resources/working_dir_files/_ray_pkg_ab12"
    pair.join_set_up(RANK_0)
    for request in pair.join(RANK_1, paths=PathTranslator(shipped, "/home/me/job")) \
            .requests_to("p1"):
        for asked in pair.process_sends("p1", pair.answer(request)).requests_to("p1"):
            pair.process_sends("p1", pair.answer(asked))
    for key in ("p0", "p1"):
        pair.process_sends(key, stopped())
    threads = client_thread_ids(pair)
    frames = [{"id": 1, "name": "step", "line": 3, "source": {"path": f"{shipped}/train.py"}}]
    for key, seen in (("p1", "/home/me/job/train.py"), ("p0", f"{shipped}/train.py")):
        (request,) = pair.client_sends(pair.request("stackTrace", threadId=threads[key])) \
            .requests_to(key)
        (answer,) = pair.process_sends(key, pair.answer(request, stackFrames=frames)).responses
        assert answer.body["stackFrames"][0]["source"]["path"] == seen
    reference = pair.policy.ids.ref_to_client("sourceReference", "p1", 4, None)
    (source,) = pair.client_sends(pair.request("source", source={
        "path": "/home/me/job/gen.py", "sourceReference": reference})).requests_to("p1")
    assert source.arguments["source"] == {"path": f"{shipped}/gen.py", "sourceReference": 4}


def test_the_group_modules_import_no_io_and_no_threads():
    code = ("import sys, raydebug.protocol.group_ids, raydebug.protocol.group_policy; "
            "print(sorted(m for m in ('socket', 'asyncio', 'ray', 'selectors', 'debugpy', "
            "'threading') if m in sys.modules))")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            check=True, timeout=60)
    assert result.stdout.strip() == "[]"


def _a_frame_of(pair: GroupPair, key: str) -> int:
    """The client's id of the top frame of ``key``'s thread 1, by a ``stackTrace``."""
    thread = pair.policy.ids.thread_to_client(key, 1)
    (request,) = pair.client_sends(pair.request("stackTrace", threadId=thread)) \
        .requests_to(key)
    (answer,) = pair.process_sends(key, pair.answer(request, stackFrames=[
        {"id": 7, "name": "f", "line": 1}])).responses
    return int(answer.body["stackFrames"][0]["id"])
