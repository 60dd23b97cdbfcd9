"""TLS on the agent listener: agents pin the hub's self-signed certificate."""

from __future__ import annotations

import os
import socket
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from helpers import PAUSING_WORKER, HubProcess, finish, start_hub, write_script
from raydebug import tls

pytestmark = pytest.mark.integration


@pytest.fixture
def tls_hub() -> Iterator[HubProcess]:
    with start_hub("--tls", "--handshake-timeout", "2") as hub:
        yield hub


def test_a_worker_pinning_the_certificate_is_debugged_over_tls(tls_hub: HubProcess,
                                                               tmp_path: Path):
    assert tls_hub.cert is not None and tls_hub.cert.startswith("sha256:")
    proc = tls_hub.spawn(write_script(tmp_path, "worker.py", PAUSING_WORKER))
    [session] = tls_hub.wait_sessions(1)
    assert tls_hub.evaluate_and_detach(session["id"], "value") == "41"
    code, out, _ = finish(proc)
    assert code == 0 and "finished 42" in out


def test_the_certificate_is_private_and_reused(tls_hub: HubProcess):
    assert tls_hub.state is not None
    directory = tls_hub.state / "raydebug"
    for name in (tls.CERT_FILE, tls.KEY_FILE):
        assert os.stat(directory / name).st_mode & 0o777 == 0o600
    with start_hub("--tls", state=tls_hub.state) as again:
        assert again.cert == tls_hub.cert


def test_a_worker_pinning_another_certificate_refuses_the_hub(tls_hub: HubProcess,
                                                              tmp_path: Path):
    wrong = "sha256:" + "0" * 64
    err = tls_hub.run_unserved(tmp_path, RAYDEBUG_HUB_CERT=wrong)
    assert f"presented certificate {tls_hub.cert}, not the pinned {wrong}" in err
    assert "refusing to connect" in err
    assert tls_hub.get("/api/health")["registered_total"] == 0  # the hub learned nothing
    assert "the agent closed the connection during the handshake" in tls_hub.stop_and_read_log()


def test_a_plaintext_worker_is_refused_by_a_tls_hub(tls_hub: HubProcess, tmp_path: Path):
    err = tls_hub.run_unserved(tmp_path, RAYDEBUG_HUB_CERT="")
    assert "before its challenge: if it runs with --tls, set RAYDEBUG_HUB_CERT" in err

    # Plaintext bytes and silence on the TLS port: both closed (silence within the
    # handshake timeout, 2 s here), both logged, and the hub serves on.
    with socket.create_connection(tls_hub.worker, timeout=10) as sock:
        sock.sendall(b"Content-Length: 2\r\n\r\n{}")
        while sock.recv(65536):  # a TLS alert, then the end
            pass
    started = time.monotonic()
    with socket.create_connection(tls_hub.worker, timeout=10) as sock:
        assert sock.recv(65536) == b""
    assert time.monotonic() - started < 8
    assert tls_hub.get("/api/health")["registered_total"] == 0
    log = tls_hub.stop_and_read_log()
    assert log.count("refused: no TLS handshake") >= 3, log
    assert "Traceback" not in log


def test_pins_are_read_as_fingerprints_or_pem_files(tls_hub: HubProcess):
    assert tls_hub.cert is not None
    bare = tls_hub.cert.removeprefix("sha256:").upper()
    colons = ":".join(bare[i:i + 2] for i in range(0, len(bare), 2))
    assert tls.parse_pin(colons, "X") == tls_hub.cert
    assert tls_hub.state is not None
    pem = tls_hub.state / "raydebug" / tls.CERT_FILE
    assert tls.parse_pin(str(pem), "X") == tls_hub.cert
    with pytest.raises(tls.ConfigurationError, match="RAYDEBUG_HUB_CERT='nope'"):
        tls.parse_pin("nope", "RAYDEBUG_HUB_CERT")
