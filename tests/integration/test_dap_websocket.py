"""The browser's DAP path: a WebSocket on the client port, each text message one DAP
message, served by the same client connection as an IDE's (routing, policy, token)."""

from __future__ import annotations

import json
import urllib.request
from pathlib import Path

import pytest
from wsproto.frame_protocol import CloseReason

from helpers import PAUSING_WORKER, HubProcess, finish, start_hub, write_script
from raydebug.hub.http.websocket import MAX_MESSAGE
from websocket_client import Refused, WebSocketClient

pytestmark = pytest.mark.integration


def attach(ws: WebSocketClient, session: str, **raydebug: str) -> dict[str, object]:
    """initialize + attach + configurationDone, as the page does; the ``stopped`` event."""
    assert ws.call("initialize", {"adapterID": "raydebug", "pathFormat": "path",
                                  "linesStartAt1": True, "columnsStartAt1": True})["success"]
    seq = ws.request("attach", {"name": "web", "raydebug": {"session": session, **raydebug}})
    ws.wait("event", "initialized")
    ws.call("configurationDone")
    assert ws.wait("response", "attach", seq)["success"]
    return ws.wait("event", "stopped")


def test_a_browser_debugs_a_paused_process_over_the_websocket(hub: HubProcess, tmp_path: Path):
    proc = hub.spawn(write_script(tmp_path, "worker.py", PAUSING_WORKER))
    [session] = hub.wait_sessions(1)
    ws = WebSocketClient(hub.client, origin=f"http://{hub.client_address}")
    stopped = attach(ws, session["id"])
    thread = stopped["body"]["threadId"]  # type: ignore[index]
    frames = ws.call("stackTrace", {"threadId": thread})["body"]["stackFrames"]
    assert frames[0]["line"] == 3 and frames[0]["source"]["path"].endswith("worker.py")
    value = ws.call("evaluate", {"expression": "value + 1", "frameId": frames[0]["id"],
                                 "context": "repl"})
    assert value["body"]["result"] == "42"
    # the same policy as an IDE's: terminate is refused, the process is not killed
    assert not ws.call("terminate")["success"]
    ws.call("continue", {"threadId": thread})
    ws.call("disconnect", {})
    ws.close()
    code, out, _ = finish(proc)
    assert code == 0 and "finished 42" in out


def test_wrong_origin_and_bad_frames_are_refused_with_a_reason(hub: HubProcess):
    with pytest.raises(Refused) as refused:
        WebSocketClient(hub.client, origin="https://attacker.example")
    assert refused.value.status == 403
    with pytest.raises(Refused) as missing:
        WebSocketClient(hub.client, path="/nope")
    assert missing.value.status == 404

    for send, code in [
        (lambda ws: ws.send_bytes(b"\x00\x01"), CloseReason.UNSUPPORTED_DATA),
        (lambda ws: ws.send_text("{not json"), CloseReason.INVALID_FRAME_PAYLOAD_DATA),
        (lambda ws: ws.send_text("[1, 2]"), CloseReason.INVALID_FRAME_PAYLOAD_DATA),
        (lambda ws: ws.send_text(" " * (MAX_MESSAGE + 1)), CloseReason.MESSAGE_TOO_BIG),
        # an unmasked client frame breaks RFC 6455: wsproto's verdict, passed on
        (lambda ws: ws.send_raw(b"\x81\x02{}"), CloseReason.PROTOCOL_ERROR),
        # a DAP message the hub's DAP side refuses (a request without a command)
        (lambda ws: ws.send_text('{"seq": 1, "type": "request"}'), CloseReason.NORMAL_CLOSURE),
    ]:
        ws = WebSocketClient(hub.client)
        send(ws)
        while ws.next_message() is not None:
            pass
        assert ws.closed is not None and ws.closed.code == code, ws.closed
        assert code == CloseReason.NORMAL_CLOSURE or ws.closed.reason
        ws.close()
    assert hub.get("/api/health")["status"] == "ok"


def test_with_a_client_token_the_cookie_admits_the_websocket(tmp_path: Path):
    hub = start_hub("--client-token", "s3cret")
    try:
        proc = hub.spawn(write_script(tmp_path, "worker.py", PAUSING_WORKER))
        with pytest.raises(Refused) as refused:
            WebSocketClient(hub.client)
        assert refused.value.status == 401
        [session] = _sessions(hub, "s3cret")
        ws = WebSocketClient(hub.client, cookie="raydebug_token=s3cret")
        # the page cannot read its cookie, so its attach carries no token: the upgrade proved it
        stopped = attach(ws, session["id"])
        ws.call("continue", {"threadId": stopped["body"]["threadId"]})  # type: ignore[index]
        ws.call("disconnect", {})
        ws.close()
        assert finish(proc)[0] == 0
    finally:
        hub.close()


def _sessions(hub: HubProcess, token: str) -> list[dict[str, str]]:
    request = urllib.request.Request(
        f"http://{hub.client_address}/api/sessions?min=1&timeout=30",
        headers={"Authorization": f"Bearer {token}"})
    with urllib.request.urlopen(request, timeout=40) as response:
        sessions: list[dict[str, str]] = json.loads(response.read())
    return sessions
