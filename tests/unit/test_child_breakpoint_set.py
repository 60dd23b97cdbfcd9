"""In memory: the hub's one breakpoint set is what every child session's pydevd is sent
(whoever set each breakpoint, paths moved to where the process's code lives, then only what
changed) beside the child's client's own breakpoints; a cluster session, and the hub before
a client's attach, answer every request once."""

from __future__ import annotations

import asyncio
import socket
from typing import Any

from devtools.scripted_peer import ScriptedParent
from raydebug.hub.agents.data_connections import PendingDataConnections
from raydebug.hub.clients.cluster_attach import ClusterAttach
from raydebug.hub.clients.cluster_sessions import ClusterSessions
from raydebug.hub.clients.handler import ClientHandler
from raydebug.hub.cluster_breakpoints import DapSessionBreakpoints
from raydebug.hub.registry import Registry
from raydebug.protocol import DapConnection, Request, Response


def sent(requests: list[Request]) -> list[tuple[str, Any]]:
    return [(r.command, r.arguments) for r in requests]


def test_a_child_is_sent_every_clients_breakpoints_then_what_changed():
    sessions = ClusterSessions()
    ide = sessions.add("127.0.0.1", lambda text: None)
    sessions.set_from_terminal({"path": "/me/job.py", "line": 3, "condition": "i > 2",
                                "localRoot": "/me"})
    sessions.set_from_terminal({"source": {"path": "/srv/lib.py"},
                                "breakpoints": [{"line": 9}]})  # the web page's
    sessions.edit(ide, Request(seq=1, command="setBreakpoints", arguments={
        "source": {"path": "/me/job.py"}, "breakpoints": [{"line": 5}]}), "/me")
    sessions.edit(ide, Request(seq=2, command="setFunctionBreakpoints", arguments={
        "breakpoints": [{"name": "train"}]}), "/me")
    sessions.edit(ide, Request(seq=3, command="setExceptionBreakpoints", arguments={
        "filters": ["raised"]}), "/me")
    child = DapSessionBreakpoints(remote_root="/tmp/ray/_ray_pkg_1")
    assert sent(child.bring_up_to(sessions.cluster)) == [
        ("setBreakpoints", {"source": {"path": "/tmp/ray/_ray_pkg_1/job.py"},
                            "breakpoints": [{"line": 3, "condition": "i > 2"}, {"line": 5}]}),
        ("setBreakpoints", {"source": {"path": "/srv/lib.py"}, "breakpoints": [{"line": 9}]}),
        ("setFunctionBreakpoints", {"breakpoints": [{"name": "train"}]}),
        ("setExceptionBreakpoints", {"filters": ["raised"]})]
    assert child.bring_up_to(sessions.cluster) == []  # nothing changed
    sessions.set_from_terminal({"clear": True})
    assert sent(child.bring_up_to(sessions.cluster)) == [
        ("setBreakpoints", {"source": {"path": "/tmp/ray/_ray_pkg_1/job.py"},
                            "breakpoints": [{"line": 5}]}),
        ("setBreakpoints", {"source": {"path": "/srv/lib.py"}, "breakpoints": []})]
    sessions.remove(ide)  # the IDE's cluster session ended: its breakpoints go
    assert sent(child.bring_up_to(sessions.cluster)) == [
        ("setBreakpoints", {"source": {"path": "/tmp/ray/_ray_pkg_1/job.py"},
                            "breakpoints": []}),
        ("setFunctionBreakpoints", {"breakpoints": []}),
        ("setExceptionBreakpoints", {"filters": []})]


def test_the_childs_own_breakpoints_stay_and_the_set_is_added_to_them():
    """pydevd replaces a file's breakpoints (or the functions, or the filters) with each
    request: after the client's own, the set's are sent again beside them."""
    sessions = ClusterSessions()
    sessions.set_from_terminal({"path": "/srv/job.py", "line": 3})
    sessions.set_from_terminal({"path": "/srv/job.py", "line": 5, "condition": "i > 2"})
    ide = sessions.add(None, lambda text: None)
    sessions.edit(ide, Request(seq=1, command="setExceptionBreakpoints", arguments={
        "filters": ["raised"]}), None)
    child = DapSessionBreakpoints(remote_root=None)
    child.bring_up_to(sessions.cluster)
    child.client_sent(Request(seq=2, command="setBreakpoints", arguments={
        "source": {"path": "/srv/job.py"}, "breakpoints": [{"line": 5}, {"line": 9}]}))
    child.client_sent(Request(seq=3, command="setExceptionBreakpoints", arguments={
        "filters": []}))  # as our own DapClient says
    child.client_sent(Request(seq=4, command="setFunctionBreakpoints", arguments={
        "breakpoints": [{"name": "train"}]}))
    assert sent(child.bring_up_to(sessions.cluster)) == [  # its line 5 is the client's
        ("setBreakpoints", {"source": {"path": "/srv/job.py"},
                            "breakpoints": [{"line": 5}, {"line": 9}, {"line": 3}]}),
        ("setExceptionBreakpoints", {"filters": ["raised"]})]
    sessions.set_from_terminal({"clear": True})
    assert sent(child.bring_up_to(sessions.cluster)) == [
        ("setBreakpoints", {"source": {"path": "/srv/job.py"},
                            "breakpoints": [{"line": 5}, {"line": 9}]})]


def test_followers_hear_each_change_until_they_stop():
    pushed: list[dict[str, Any]] = []
    sessions = ClusterSessions(push=pushed.append)
    heard: list[int] = []
    unfollow = sessions.follow(lambda: heard.append(len(pushed)))
    ide = sessions.add(None, lambda text: None)
    body = sessions.edit(ide, Request(seq=1, command="setBreakpoints", arguments={
        "source": {"path": "/me/job.py"}, "breakpoints": [{"line": 5}]}), None)
    assert [b["line"] for b in body["breakpoints"]] == [5]
    sessions.set_from_terminal({"path": "/me/job.py", "line": 3})
    assert heard == [1, 2]  # each after the processes were sent the set
    unfollow()
    unfollow()  # idempotent
    sessions.set_from_terminal({"clear": True})
    assert heard == [1, 2]


def test_a_cluster_session_answers_each_request_once_and_any_other_command_fails():
    commands = ["configurationDone", "threads", "setExceptionBreakpoints", "pause",
                "continue", "stackTrace", "evaluate", "terminate", "disconnect"]
    client = ScriptedParent([Request(seq=n, command=command, arguments={})
                             for n, command in enumerate(commands, start=2)])
    parent = ClusterAttach(client, Registry(), ClusterSessions(),  # type: ignore[arg-type]
                           Request(seq=1, command="attach", arguments={}))

    asyncio.run(asyncio.wait_for(parent.run(), 5))
    assert [command for command, _ in client.responses] == ["attach", *commands]
    failed = {command: body for command, body in client.responses
              if isinstance(body, str) and body.startswith("failed: ")}
    assert failed == {command: f"failed: {command!r}: this is the cluster session; select "
                               "one of its child sessions" for command in ("stackTrace",
                                                                           "evaluate")}
    assert [event.event for event in client.events] == ["initialized", "terminated"]


def test_before_attach_each_request_gets_one_answer_from_the_hub():
    """A real :class:`ClientHandler` on a socket pair: ``initialize`` is answered with the
    capabilities, ``launch`` and any command but ``attach`` fail once each, ``disconnect``
    ends the connection."""
    commands = ["initialize", "launch", "threads", "setBreakpoints", "evaluate", "disconnect"]

    async def scenario() -> dict[int, Response]:
        hub_end, client_end = socket.socketpair()
        reader, writer = await asyncio.open_connection(sock=hub_end)
        client_reader, client_writer = await asyncio.open_connection(sock=client_end)
        dap = DapConnection()
        sent = b"".join(dap.send(Request(seq=n, command=command, arguments={}))
                        for n, command in enumerate(commands, start=1))
        handler = ClientHandler(Registry(), PendingDataConnections(), False, reader, writer,
                                sent, "test", ClusterSessions())
        await asyncio.wait_for(handler.run(), 5)
        writer.close()
        dap.receive_data(await asyncio.wait_for(client_reader.read(), 5))
        client_writer.close()
        answers: dict[int, Response] = {}
        while isinstance(message := dap.next_event(), Response):
            assert message.request_seq not in answers, "answered twice"
            answers[message.request_seq] = message
        return answers

    answers = asyncio.run(scenario())
    assert sorted(answers) == list(range(1, len(commands) + 1))
    assert [answers[n].success for n in sorted(answers)] == [
        True, False, False, False, False, True]
    assert answers[1].body["supportsConfigurationDoneRequest"]
    assert "use \"request\": \"attach\"" in str(answers[2].message)
    assert answers[3].message == "'threads' before attach: attach to a session first"
