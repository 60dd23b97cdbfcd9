"""The client port's HTTP side against a real hub: the admission rules, bounds, POST bodies,
the page's files with their Content-Security-Policy, and the client token's cookie."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
import urllib.request

import pytest

from helpers import PAUSING_WORKER, HubProcess, start_hub, write_script
from raydebug.hub.http.exchange import MAX_REQUEST_BODY, MAX_REQUEST_HEAD

pytestmark = pytest.mark.integration


def exchange(address: tuple[str, int], payload: bytes, timeout: float = 20.0) -> bytes:
    """Send ``payload``, then read until the hub closes the connection."""
    with socket.create_connection(address, timeout=timeout) as sock:
        try:
            sock.sendall(payload)
        except OSError:
            pass  # the hub may answer and close before it has read everything
        received = b""
        try:
            while chunk := sock.recv(65536):
                received += chunk
        except ConnectionResetError:
            pass
    return received


def status(answer: bytes) -> int:
    return int(answer.split(b" ", 2)[1])


def headers(answer: bytes) -> dict[str, str]:
    head = answer.split(b"\r\n\r\n", 1)[0].decode("latin-1").split("\r\n")[1:]
    return {name.lower(): value.strip() for name, _, value in
            (line.partition(":") for line in head)}


def test_the_admission_rules_hold(hub: HubProcess):
    get = b"GET /api/sessions HTTP/1.1\r\n"
    assert status(exchange(hub.client, get + b"Host: 127.0.0.1\r\n\r\n")) == 200
    assert status(exchange(hub.client, get + b"Host: localhost:1\r\n\r\n")) == 200
    assert status(exchange(hub.client, b"GET /api/sessions HTTP/1.0\r\n\r\n")) == 200
    assert status(exchange(hub.client, get + b"\r\n")) == 400  # HTTP/1.1 needs Host
    rebound = exchange(hub.client, get + b"Host: attacker.example\r\n\r\n")
    assert status(rebound) == 421 and b"DNS rebinding" in rebound
    foreign = exchange(hub.client, get + b"Host: 127.0.0.1\r\nOrigin: https://x.example\r\n\r\n")
    assert status(foreign) == 403
    assert "access-control-allow-origin" not in headers(foreign)


def test_heads_and_bodies_are_bounded(hub: HubProcess):
    huge = b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nX: " + b"a" * (MAX_REQUEST_HEAD + 10)
    assert status(exchange(hub.client, huge)) in (400, 431)
    started = time.monotonic()
    with socket.create_connection(hub.client, timeout=30) as sock:
        sock.sendall(b"GET /api/health HTTP/1.1\r\nHost: 127.0.0.1\r\n")  # never ends
        answer = sock.recv(65536)
    assert status(answer) == 408 and time.monotonic() - started < 25
    body = b"{" + b" " * (MAX_REQUEST_BODY + 1) + b"}"
    too_big = exchange(hub.client, b"POST /api/login HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                       b"Content-Length: %d\r\n\r\n" % len(body) + body)
    assert status(too_big) == 400 and b"larger than" in too_big
    not_json = exchange(hub.client, b"POST /api/login HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                        b"Content-Length: 3\r\n\r\n{x}")
    assert status(not_json) == 400 and b"not JSON" in not_json


def test_the_page_is_served_with_a_strict_policy(hub: HubProcess):
    page = exchange(hub.client, b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
    assert status(page) == 200 and b"<!doctype html>" in page.lower()
    policy = headers(page)["content-security-policy"]
    assert "default-src 'self'" in policy and "unsafe-inline" not in policy
    assert headers(page)["content-type"].startswith("text/html")
    # every answer carries it, errors too
    missing = exchange(hub.client, b"GET /nope HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
    assert status(missing) == 404 and "content-security-policy" in headers(missing)
    head = exchange(hub.client, b"HEAD /api/health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
    assert status(head) == 200 and head.endswith(b"\r\n\r\n")


def test_a_client_token_is_kept_in_a_strict_cookie():
    hub = start_hub("--client-token", "s3cret")
    try:
        get = b"GET /api/sessions HTTP/1.1\r\nHost: 127.0.0.1\r\n"
        assert status(exchange(hub.client, get + b"\r\n")) == 401
        assert status(exchange(hub.client, b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")) == 200
        assert status(exchange(hub.client, get + b"Cookie: raydebug_token=nope\r\n\r\n")) == 401
        assert status(exchange(hub.client, get + b"Cookie: a=b; raydebug_token=s3cret\r\n\r\n")) \
            == 200
        assert status(exchange(hub.client, get + b"Authorization: Bearer s3cret\r\n\r\n")) == 200
        link = exchange(hub.client, b"GET /?token=s3cret HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        assert status(link) == 303 and headers(link)["location"] == "/"
        cookie = headers(link)["set-cookie"]
        assert "raydebug_token=s3cret" in cookie and "HttpOnly" in cookie \
            and "SameSite=Strict" in cookie
        wrong = exchange(hub.client, b"GET /?token=x HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        assert status(wrong) == 303 and "set-cookie" not in headers(wrong)
        login = b"POST /api/login HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: %d\r\n\r\n"
        right = b'{"token": "s3cret"}'
        answer = exchange(hub.client, login % len(right) + right)
        assert status(answer) == 200 and "HttpOnly" in headers(answer)["set-cookie"]
        bad = b'{"token": "guess"}'
        assert status(exchange(hub.client, login % len(bad) + bad)) == 401
    finally:
        hub.close()


def test_raydebug_web_prints_the_page_with_the_token_link():
    hub = start_hub("--client-token", "s3cret")
    try:
        web = [sys.executable, "-m", "raydebug", "web", "--hub", hub.client_address]
        asked = subprocess.run(web, capture_output=True, text=True, timeout=60)
        assert asked.returncode == 0, asked.stderr
        assert asked.stdout.splitlines()[0] == f"http://{hub.client_address}/"
        assert "ask for the hub's client token" in asked.stdout
        linked = subprocess.run([*web, "--client-token", "s3cret"], capture_output=True,
                                text=True, timeout=60)
        assert linked.stdout.splitlines()[0] == f"http://{hub.client_address}/?token=s3cret"
    finally:
        hub.close()
    nobody = subprocess.run([sys.executable, "-m", "raydebug", "web", "--hub", "127.0.0.1:1"],
                            capture_output=True, text=True, timeout=60)
    assert nobody.returncode == 1 and "Traceback" not in nobody.stderr
    assert len(nobody.stderr.strip().splitlines()) == 1


def test_the_process_list_long_polls_for_its_next_version(hub: HubProcess, tmp_path):
    """``after=VERSION`` answers on the change after that version, not at once, and a long
    poll with nothing changing ends at its ``timeout`` with what there is."""

    def listing(query: str) -> tuple[list, int]:
        with urllib.request.urlopen(f"http://{hub.client_address}/api/processes?{query}",
                                    timeout=30) as response:
            return json.loads(response.read()), int(response.headers["Raydebug-Version"])

    empty, version = listing("now=0")
    assert empty == []
    started = time.monotonic()
    again, same = listing(f"now=0&after={version}&timeout=0.5")
    assert (again, same) == ([], version) and time.monotonic() - started >= 0.5
    hub.spawn(write_script(tmp_path, "paused.py", PAUSING_WORKER), RAYDEBUG_LIVE="1")
    listed, later = listing(f"now=0&after={version}&timeout=60")
    assert later > version and len(listed) == 1 and listed[0]["live"], listed
    assert status(exchange(hub.client, b"GET /api/processes?after=x&timeout=1 HTTP/1.1\r\n"
                           b"Host: 127.0.0.1\r\n\r\n")) == 400
