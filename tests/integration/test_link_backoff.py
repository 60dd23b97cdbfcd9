"""A hub that proves the token and then drops the connection at once must not be redialled
in a loop: the link backs off as for a failed connect until a connection has lasted."""

from __future__ import annotations

import os
import socket
import sys
import threading
from pathlib import Path

import pytest

from helpers import PAUSING_WORKER, finish, write_script
from raydebug.protocol import NEED_DATA
from raydebug.protocol.handshake import HubHandshake

pytestmark = pytest.mark.integration

TOKEN = "backoff-token"


class DroppingHub:
    """A real handshake (the worker accepts it), then an immediate close; counts them."""

    def __init__(self) -> None:
        self.server = socket.create_server(("127.0.0.1", 0))
        self.server.settimeout(0.2)
        self.address = "{}:{}".format(*self.server.getsockname()[:2])
        self.proven = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self.server.accept()
            except TimeoutError:
                continue
            with conn:
                conn.settimeout(5)
                handshake = HubHandshake(TOKEN)
                conn.sendall(handshake.send())
                try:
                    while handshake.next_event() is NEED_DATA:
                        handshake.receive_data(conn.recv(65536))
                    conn.sendall(handshake.send())  # the welcome, with the hub's proof
                    self.proven += 1
                except Exception:
                    continue  # a data connection or a hang-up: just close it

    def close(self) -> None:
        self._stop.set()
        self._thread.join(5)
        self.server.close()


def test_a_hub_that_drops_the_connection_at_once_is_redialled_with_backoff(tmp_path: Path):
    hub = DroppingHub()
    try:
        env = {**os.environ, "PYTHONBREAKPOINT": "raydebug.set_trace", "RAYDEBUG_HUB": hub.address,
               "RAYDEBUG_TOKEN": TOKEN, "RAYDEBUG_WAIT_TIMEOUT": "4", "PYTHONUNBUFFERED": "1",
               "PYDEVD_DISABLE_FILE_VALIDATION": "1"}
        import subprocess

        proc = subprocess.Popen([sys.executable, str(write_script(tmp_path, "w.py",
                                                                  PAUSING_WORKER))],
                                env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                text=True)
        code, out, err = finish(proc)
        assert code == 0 and "finished 42" in out, err
        # 4 s of waiting with delays 0.2, 0.5, 1, 2 s: five at most; without backoff
        # it was redialled as fast as the two sides could handshake (14 in a run here).
        assert 1 <= hub.proven <= 6, (hub.proven, err)
    finally:
        hub.close()
