"""Step together in memory: a step of one thread moves the thread of every other paused
process of the group stopped in the same function, and no other."""

from __future__ import annotations

from group_pair import GroupPair, client_thread_ids, stopped

from raydebug.protocol.group_rewrite import Member
from raydebug.protocol.group_steps import StepTogether, top_of

RANKS = [Member(f"p{rank}", pid=6000 + rank, rank=str(rank)) for rank in range(3)]


def frames_in(function: str) -> list[dict[str, object]]:
    return [{"id": 1, "name": function, "line": 5, "source": {"path": "/job/train.py"}}]


def paused_in(**functions: str) -> GroupPair:
    """A step-together group whose process ``key`` stopped in ``functions[key]``, as the
    hub learnt by asking each stopped thread's top frame."""
    pair = GroupPair(step_together=True)
    members = [member for member in RANKS if member.key in functions]
    pair.join_set_up(*members)
    for member in members:
        (asked,) = pair.process_sends(member.key, stopped()).requests_to(member.key)
        assert (asked.command, asked.arguments) == ("stackTrace", {"threadId": 1, "levels": 1})
        answered = pair.process_sends(member.key, pair.answer(
            asked, stackFrames=frames_in(functions[member.key])))
        assert answered.to_client == []  # the hub's own question: never the client's
    return pair


def test_a_step_moves_the_thread_of_each_process_stopped_in_the_same_function():
    pair = paused_in(p0="train_step", p1="train_step", p2="save")
    threads = client_thread_ids(pair)
    step = pair.request("next", threadId=threads["p0"])
    sent = pair.client_sends(step)
    assert {key: [(r.command, r.arguments) for r in sent.requests_to(key)]
            for key in sent.to_process} == {"p0": [("next", {"threadId": 1})],
                                            "p1": [("next", {"threadId": 1})]}
    assert [(e.event, e.body) for e in sent.events] == [
        ("continued", {"threadId": threads["p1"], "allThreadsContinued": False})]
    # one answer, the stepping thread's; the companion's is the hub's own
    assert pair.process_sends("p1", pair.answer(sent.requests_to("p1")[0])).to_client == []
    (answer,) = pair.process_sends("p0", pair.answer(sent.requests_to("p0")[0])).responses
    assert answer.request_seq == step.seq and answer.success
    # both stop on the next line as any stop; the one in save() was never asked
    assert [e.event for e in pair.process_sends("p1", stopped()).events] == ["stopped"]


def test_a_companion_that_moved_or_was_never_located_is_left_alone():
    pair = paused_in(p0="train_step", p1="train_step")
    threads = client_thread_ids(pair)
    pair.client_sends(pair.request("continue", threadId=threads["p1"], singleThread=True))
    alone = pair.client_sends(pair.request("stepIn", threadId=threads["p0"]))
    assert list(alone.to_process) == ["p0"] and alone.events == []


def test_without_step_together_a_step_moves_one_thread_and_asks_no_top_frames():
    pair = GroupPair()
    pair.join_set_up(*RANKS[:2])
    assert all(pair.process_sends(m.key, stopped()).to_process == {} for m in RANKS[:2])
    sent = pair.client_sends(pair.request("next", threadId=client_thread_ids(pair)["p0"]))
    assert list(sent.to_process) == ["p0"]


def test_the_clients_own_stack_traces_locate_threads_too():
    steps = StepTogether()
    steps.stopped_in("a", 1, frames_in("f"))
    steps.stopped_in("b", 4, frames_in("f"))
    steps.stopped_in("c", 2, [{"id": 1, "name": "f", "source": {"path": "/other.py"}}])
    assert steps.companions("a", 1, {"b": {4}, "c": {2}}) == [("b", 4)]
    steps.moved("b")
    assert steps.companions("a", 1, {"b": {4}}) == []
    assert top_of([]) is None and top_of([{"name": "f"}]) is None
