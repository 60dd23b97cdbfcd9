"""Kept snapshots in a group session, in memory: each joins the group as a member whose
read-only session answers at once: a stopped thread named as a snapshot, its captured stack
and values through the group's ids, stepping refused, and a ``continue`` ends it (its thread
exits) while every request still gets exactly one answer."""

from __future__ import annotations

from typing import Any

from test_snapshot_session import failure_snapshot

from raydebug.protocol import Event, Request, Response
from raydebug.protocol.group_actions import Action, ToClient, ToProcess
from raydebug.protocol.group_policy import GroupPolicy
from raydebug.protocol.group_snapshots import GroupSnapshots


class Group:
    """A group policy showing one snapshot; carries out what it decides, as the hub does."""

    def __init__(self) -> None:
        self.policy = GroupPolicy()
        self.snapshots = GroupSnapshots(self.policy)
        self.to_client: list[Any] = []
        self.seq = 0
        self.carry_out(self.snapshots.join([failure_snapshot()], {"adapterID": "test"}, {}))

    def carry_out(self, actions: list[Action]) -> None:
        for action in actions:
            if isinstance(action, ToClient):
                self.to_client.append(action.message)
            elif isinstance(action, ToProcess):
                assert action.key in self.snapshots, action
                self.carry_out(self.snapshots.send(action.key, action.message, 0.0))

    def send(self, command: str, **arguments: Any) -> Response:
        self.seq += 1
        before = len(self.to_client)
        self.carry_out(self.policy.from_client(Request(self.seq, command, arguments)))
        [answer] = [m for m in self.to_client[before:]
                    if isinstance(m, Response) and m.request_seq == self.seq]
        return answer

    def events(self, name: str) -> list[Event]:
        return [m for m in self.to_client if isinstance(m, Event) and m.event == name]


def test_a_snapshot_is_a_stopped_thread_of_the_group_read_through_its_ids():
    group = Group()
    [stopped] = group.events("stopped")
    assert stopped.body["reason"] == "exception"
    [thread] = group.send("threads").body["threads"]
    assert thread["id"] == stopped.body["threadId"]
    assert thread["name"] == "rank 3 · train_step · pid 4242 · snapshot [ValueError] · MainThread"
    top = group.send("stackTrace", threadId=thread["id"]).body["stackFrames"][0]
    assert (top["name"], top["line"]) == ("train", 3)
    [scope] = group.send("scopes", frameId=top["id"]).body["scopes"]
    names = [v["name"] for v in group.send(
        "variables", variablesReference=scope["variablesReference"]).body["variables"]]
    assert names[:2] == ["config", "rows"]
    value = group.send("evaluate", expression="config['layers'][0]['width']",
                       frameId=top["id"], context="repl")
    assert value.success and value.body["result"] == "8"
    step = group.send("next", threadId=thread["id"])
    assert not step.success and "snapshot" in (step.message or "")
    again = group.events("stopped")[-1]  # a refused step: the thread is still stopped
    assert len(group.events("stopped")) == 2 and again.body["threadId"] == thread["id"]
    top = group.send("stackTrace", threadId=thread["id"]).body["stackFrames"][0]
    info = group.send("exceptionInfo", threadId=thread["id"])
    assert info.body["exceptionId"] == "ValueError"
    assert group.send("continue", threadId=thread["id"]).body["allThreadsContinued"]
    assert [e.body["threadId"] for e in group.events("thread")] == [thread["id"]]  # exited


def test_continue_ends_the_snapshots_view_and_its_thread_exits():
    group = Group()
    [thread] = group.send("threads").body["threads"]
    assert group.send("continue", threadId=thread["id"]).success
    assert [e.body for e in group.events("thread")] == [
        {"reason": "exited", "threadId": thread["id"]}]
    assert group.send("threads").body["threads"] == []
    assert not group.send("stackTrace", threadId=thread["id"]).success  # an id it no longer holds
    group.carry_out(group.snapshots.join([failure_snapshot()], {"adapterID": "test"}, {}))
    assert group.send("threads").body["threads"] == []  # shown again only to a new session
