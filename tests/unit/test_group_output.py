"""A group session's output in memory, through the policy: each process's lines reach the
client whole, each prefixed with who wrote it, however its pieces interleave with others'."""

from __future__ import annotations

from group_pair import GroupPair, group, stopped

from raydebug.protocol import Event
from raydebug.protocol.group_output import PARTIAL_LINE_WAIT, prefixed
from raydebug.protocol.group_rewrite import Member

RANKS = [Member(f"p{rank}", pid=21559 + rank, rank=str(rank)) for rank in range(3)]
UNRANKED = Member("px", pid=77)


def output(text: str, category: str = "stdout") -> Event:
    return Event(3, "output", {"category": category, "output": text})


def shown(pair: GroupPair, key: str, *texts: str, category: str = "stdout") -> list[str]:
    """What the client is shown when process ``key`` writes ``texts``, one event each."""
    delivered = pair.process_sends(key, *(output(text, category) for text in texts))
    return [event.body["output"] for event in delivered.events]


def test_prints_written_in_pieces_by_several_processes_reach_the_client_as_whole_lines():
    pair = group(*RANKS)
    # print("rank", r, value) is written "rank", " ", "r", " ", "value", "\n": the repro's
    # order, as the three processes' pieces reached the hub.
    pieces = [("p2", "rank"), ("p2", " "), ("p2", "2"), ("p2", " "), ("p2", "3"),
              ("p0", "rank"), ("p0", " "), ("p1", "rank"), ("p1", " "), ("p0", "0"),
              ("p0", " "), ("p0", "4"), ("p1", "1"), ("p2", "\n"), ("p1", " "),
              ("p0", "\n"), ("p1", "3"), ("p1", "\n")]
    client = [text for key, piece in pieces for text in shown(pair, key, piece)]
    assert client == ["[rank 2 pid 21561] rank 2 3\n", "[rank 0 pid 21559] rank 0 4\n",
                      "[rank 1 pid 21560] rank 1 3\n"]
    assert pair.policy.output_deadline() is None  # nothing held


def test_each_line_that_starts_is_prefixed_and_each_category_has_its_own_line():
    pair = group(RANKS[0], UNRANKED)
    assert shown(pair, "p0", "loss 0.1\nloss 0.2\n") == [
        "[rank 0 pid 21559] loss 0.1\n[rank 0 pid 21559] loss 0.2\n"]
    assert shown(pair, "px", "epoch ") == []  # held until its line ends
    assert shown(pair, "px", "oops\n", category="stderr") == ["[pid 77] oops\n"]
    assert shown(pair, "px", "1 done\n\nnext") == ["[pid 77] epoch 1 done\n[pid 77] \n"]
    assert shown(pair, "px", "\n") == ["[pid 77] next\n"]
    assert pair.process_sends("p0", output("{}", "telemetry")).to_client == []
    assert prefixed("", "[x] ", True) == ""


def test_a_process_that_stops_has_its_unfinished_line_shown_before_its_stop():
    pair = group(*RANKS[:2])
    assert shown(pair, "p0", "value? ") == [] and shown(pair, "p1", "half ") == []
    pair.client_sends(pair.request("continue"))
    delivered = pair.process_sends("p0", stopped())
    assert [(event.event, event.body.get("output")) for event in delivered.events] == [
        ("output", "[rank 0 pid 21559] value? "), ("stopped", None)]
    # Another process's line ends the client's unfinished one first; its own goes on it.
    assert shown(pair, "p1", "line\n") == ["\n[rank 1 pid 21560] half line\n"]
    assert shown(pair, "p0", "42\n") == ["[rank 0 pid 21559] 42\n"]


def test_an_unfinished_line_is_shown_as_it_is_after_a_short_wait_and_goes_on_unprefixed():
    pair = group(*RANKS[:2])
    assert shown(pair, "p0", "Enter ") == []
    pair.now += PARTIAL_LINE_WAIT / 2
    assert shown(pair, "p0", "a name: ") == [] and shown(pair, "p1", "later ") == []
    assert pair.policy.output_deadline() == PARTIAL_LINE_WAIT  # since p0's first piece
    assert pair.time_passes(PARTIAL_LINE_WAIT / 4).to_client == []
    due = pair.time_passes(PARTIAL_LINE_WAIT / 4).events
    assert [event.body["output"] for event in due] == ["[rank 0 pid 21559] Enter a name: "]
    assert shown(pair, "p0", "Ada\n") == ["Ada\n"]  # the client's line was p0's
    assert pair.time_passes(PARTIAL_LINE_WAIT).events[0].body["output"] == \
        "[rank 1 pid 21560] later "
    assert pair.policy.output_deadline() is None


def test_a_process_that_leaves_has_its_unfinished_line_shown_before_its_threads_exit():
    pair = group(*RANKS[:2])
    assert shown(pair, "p1", "last words", category="stderr") == []
    events = pair.process_leaves("p1").events
    assert [(event.event, event.body.get("output")) for event in events] == [
        ("output", "[rank 1 pid 21560] last words"), ("thread", None)]
    assert pair.time_passes(PARTIAL_LINE_WAIT).to_client == []
