"""The hub's proxy policy, in memory: what it forwards, rewrites, answers itself or refuses."""

from __future__ import annotations

import pytest
from dap_pair import ProxyPair

from raydebug.errors import RemoteProtocolError
from raydebug.protocol import Event, Request, Response
from raydebug.protocol.framing import frame
from raydebug.protocol.proxy_policy import (
    CLIENT_PAUSE_WAIT,
    INJECTED_SEQ,
    PASS,
    PROCESS_ENDED,
    PYDEVD_CAPABILITIES,
    adapter_capabilities,
)


def answer(request: Request, seq: int = 100, **body: object) -> Response:
    return Response(seq=seq, request_seq=request.seq, command=request.command, body=dict(body))


def test_requests_and_answers_pass_and_most_answers_are_not_parsed():
    pair = ProxyPair()
    stack_trace = Request(seq=5, command="stackTrace", arguments={"threadId": 1})
    sent = pair.client_sends(stack_trace)
    assert sent.to_worker == [stack_trace] and sent.to_client == []
    reply = pair.worker_sends(answer(stack_trace, stackFrames=[{"id": 1, "name": "f"}]))
    assert reply.unparsed
    assert reply.to_client == [answer(stack_trace, stackFrames=[{"id": 1, "name": "f"}])]
    assert reply.to_client[0].seq == 100  # pydevd's own numbering, unchanged


def test_a_body_that_concerns_no_rule_passes_even_when_it_is_not_json():
    # The proof that the fast path does not parse: the hub would refuse this if it looked.
    pair = ProxyPair()
    assert pair.policy.from_debugger(b"not json at all") is PASS
    with pytest.raises(RemoteProtocolError):
        pair.worker_sends_bytes(frame(b'{"type": "request" broken'))


def test_terminate_is_refused_and_disconnect_does_not_kill_unless_allowed():
    pair = ProxyPair()
    refused = pair.client_sends(Request(seq=1, command="terminate"))
    assert refused.to_worker == []
    (response,) = refused.to_client
    assert isinstance(response, Response) and not response.success
    assert "--allow-terminate" in (response.message or "")
    disconnect = pair.client_sends(Request(seq=2, command="disconnect",
                                           arguments={"terminateDebuggee": True}))
    assert disconnect.threads_resumed
    assert [r.arguments for r in disconnect.to_worker] == [{"terminateDebuggee": False}]

    allowed = ProxyPair(allow_terminate=True)
    terminate = Request(seq=1, command="terminate")
    assert allowed.client_sends(terminate).to_worker == [terminate]
    disconnect = allowed.client_sends(Request(seq=2, command="disconnect",
                                              arguments={"terminateDebuggee": True}))
    assert [r.arguments for r in disconnect.to_worker] == [{"terminateDebuggee": True}]


def test_the_initialize_answer_offers_terminating_only_when_allowed():
    assert adapter_capabilities(False)["supportsTerminateRequest"] is False
    assert adapter_capabilities(True)["supportTerminateDebuggee"] is True
    assert "supportsTerminateRequest" not in PYDEVD_CAPABILITIES  # not changed in place


def test_reverse_requests_from_the_debuggee_are_refused_and_never_reach_the_client():
    pair = ProxyPair()
    refused = pair.worker_sends(Request(seq=7, command="runInTerminal",
                                        arguments={"args": ["sh", "-c", "id"]}))
    assert refused.to_client == []
    (response,) = refused.to_worker
    assert isinstance(response, Response) and response.request_seq == 7
    assert not response.success and response.command == "runInTerminal"


def test_answers_to_the_hubs_own_requests_are_swallowed():
    pair = ProxyPair()
    breakpoints = Request(seq=3, command="setBreakpoints",
                          arguments={"source": {"path": "/a.py"}, "breakpoints": [{"line": 4}]})
    injected = pair.hub_injects(breakpoints, breakpoints)
    assert [r.seq for r in injected.to_worker] == [INJECTED_SEQ, INJECTED_SEQ + 1]
    assert injected.to_worker[0].arguments == breakpoints.arguments
    first, second = injected.to_worker
    assert isinstance(first, Request) and isinstance(second, Request)
    assert pair.worker_sends(answer(first), answer(second)).to_client == []
    event = Event(seq=9, event="output", body={"output": "hi"})
    assert pair.worker_sends(event).to_client == [event]  # the rest still passes


def test_the_answer_to_configuration_done_makes_the_agent_release_the_threads():
    pair = ProxyPair()
    done = Request(seq=4, command="configurationDone")
    pair.client_sends(done)
    assert not pair.worker_sends(answer(Request(seq=3, command="configurationDone"))).agent_ready
    reply = pair.worker_sends(answer(done))
    assert reply.agent_ready and reply.to_client == [answer(done)]


def test_pause_is_answered_once_by_the_hub_and_made_by_the_agent_with_a_bound():
    # pydevd alone cannot stop a thread blocked in C: the agent pauses, as raydebug pause.
    pair = ProxyPair()
    pause = Request(seq=9, command="pause", arguments={"threadId": 1})
    sent = pair.client_sends(pause)
    assert sent.to_worker == []  # pydevd never sees it: it would answer a second time
    assert [(m.request_seq, m.command, m.success) for m in sent.to_client] == [(9, "pause", True)]
    assert sent.agent_pauses == [round(CLIENT_PAUSE_WAIT * 1000)]
    # and the channel's end owes it no answer: it was answered
    assert [m.event for m in pair.channel_closes().to_client] == ["terminated"]


def test_a_pause_after_the_channel_closed_is_answered_and_asks_the_agent_nothing():
    pair = ProxyPair()
    pair.channel_closes()
    sent = pair.client_sends(Request(seq=2, command="pause", arguments={"threadId": 1}))
    assert sent.agent_pauses == [] and sent.to_client[0].message == PROCESS_ENDED


def test_when_the_channel_closes_every_request_gets_one_answer_then_terminated():
    pair = ProxyPair()
    evaluate = Request(seq=1, command="evaluate", arguments={"expression": "x"})
    threads = Request(seq=2, command="threads")
    disconnect = Request(seq=3, command="disconnect")
    pair.client_sends(evaluate, threads, disconnect)
    pair.worker_sends(answer(threads))
    closed = pair.channel_closes()
    answers = [m for m in closed.to_client if isinstance(m, Response)]
    assert [(r.request_seq, r.success) for r in answers] == [(3, True), (1, False)]
    assert answers[1].message == PROCESS_ENDED
    assert [m.event for m in closed.to_client if isinstance(m, Event)] == ["terminated"]
    later = pair.client_sends(Request(seq=4, command="stackTrace"), Request(seq=5,
                                                                            command="disconnect"))
    assert later.to_worker == []
    assert [(r.request_seq, r.success) for r in later.to_client
            if isinstance(r, Response)] == [(4, False), (5, True)]


def test_terminated_is_said_once_and_a_closing_channel_is_answered_by_the_hub():
    pair = ProxyPair()
    assert [m.event for m in pair.worker_sends(Event(seq=1, event="terminated")).to_client
            if isinstance(m, Event)] == ["terminated"]
    assert pair.channel_closes().to_client == []
    closing = ProxyPair()
    closing.data_connection_open = False
    answered = closing.client_sends(Request(seq=1, command="next"),
                                    Request(seq=2, command="scopes"))
    assert answered.to_worker == []
    assert [(r.success, r.message) for r in answered.to_client
            if isinstance(r, Response)] == [(True, None), (False, PROCESS_ENDED)]


def test_a_resume_in_flight_when_the_channel_closes_succeeds_before_terminated():
    # The process ran on as asked, then ended before pydevd's answer left it: the request
    # did what it asked. What the client needs a result from still fails.
    pair = ProxyPair()
    resumes = [Request(seq=1, command="continue", arguments={"threadId": 1}),
               Request(seq=2, command="next", arguments={"threadId": 2}),
               Request(seq=3, command="stepIn", arguments={"threadId": 3}),
               Request(seq=4, command="stepOut", arguments={"threadId": 4})]
    stack_trace = Request(seq=5, command="stackTrace", arguments={"threadId": 1})
    pair.client_sends(*resumes, stack_trace, Request(seq=6, command="disconnect"))
    closed = pair.channel_closes()
    said = [(m.request_seq, m.success) if isinstance(m, Response) else m.event
            for m in closed.to_client if isinstance(m, Response | Event)]
    assert said == [(1, True), (2, True), (3, True), (4, True), (6, True), "terminated",
                    (5, False)]
    continued = closed.to_client[0]
    assert isinstance(continued, Response) and continued.body == {"allThreadsContinued": True}
    (failed,) = [m for m in closed.to_client if isinstance(m, Response) and not m.success]
    assert failed.message == PROCESS_ENDED
    # Read once the end is known (the client sent it before it learned so): the same answers.
    later = pair.client_sends(Request(seq=7, command="continue", arguments={"threadId": 1}),
                              Request(seq=8, command="variables"))
    assert [(r.request_seq, r.success) for r in later.to_client
            if isinstance(r, Response)] == [(7, True), (8, False)]
