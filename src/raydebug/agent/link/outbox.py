"""The control messages waiting for the hub: posted from any thread, written in order by
the link thread, and waited for as the interpreter exits.
"""

from __future__ import annotations

import collections
import os
import socket
import threading
import time
from collections.abc import Callable

from ...errors import LocalProtocolError
from ...protocol.control import ControlMessage, encode_control
from ..report import say

MAX_KEPT = 20  # messages of a type waiting for a connection (snapshots: rate-limited too)
# Types kept in greater number: a logpoint's line is small, and a loop may log many before
# the link's first connection.
KEPT_OF_TYPE = {"logpoint_output": 1_000}


class Outbox:
    """A queue of control messages for the hub. Thread-safe :meth:`put`."""

    def __init__(self) -> None:
        self._queue: collections.deque[ControlMessage] = collections.deque()
        # Messages that wait for a connection instead of being dropped by clear() (a
        # snapshot: nothing else has it), by id; at most MAX_KEPT, the oldest dropped.
        self._kept: dict[int, ControlMessage] = {}
        self._lock = threading.Lock()  # put() and clear() from different threads
        self._sent = threading.Condition()  # notified as the link thread empties the queue
        self._pid = os.getpid()  # a fork child's copy never waits on the parent's link

    def put(self, message: ControlMessage, keep: bool = False) -> None:
        """Queue ``message``, after every one queued before it; ``keep``: it survives
        :meth:`clear` until written (at most :data:`MAX_KEPT` of its type, or what
        :data:`KEPT_OF_TYPE` says, the oldest of the type dropped)."""
        with self._lock:
            if keep:
                same = [key for key, kept in self._kept.items() if kept.TYPE == message.TYPE]
                if len(same) >= KEPT_OF_TYPE.get(message.TYPE, MAX_KEPT):
                    self._drop(self._kept.pop(same[0]))
                self._kept[id(message)] = message
            self._queue.append(message)

    def clear(self) -> None:
        """Drop what is queued but kept messages (a new connection: the agent registers its
        sessions anew)."""
        with self._lock:
            self._queue = collections.deque(message for message in self._queue
                                            if id(message) in self._kept)

    def _drop(self, message: ControlMessage) -> None:
        try:
            self._queue.remove(message)
        except ValueError:  # written meanwhile
            pass

    def waiting_kept(self) -> bool:
        """Whether a kept message is still queued."""
        return bool(self._kept)

    def write_to(self, sock: socket.socket) -> None:
        """On the link thread: write the queued messages to ``sock``, in order; each leaves
        the queue once written. Raises ``OSError`` (what was not written stays queued). A
        message that cannot be encoded (over the control message's limit) is dropped, said
        on stderr."""
        while self._queue:
            try:
                data = encode_control(self._queue[0])
            except LocalProtocolError as error:  # over the limit (a snapshot): it never can
                dropped = self._queue.popleft()
                self._kept.pop(id(dropped), None)
                say(f"a {dropped.TYPE} message was not sent: {error}")
                continue
            sock.sendall(data)
            written = self._queue.popleft()  # only once written (see wait_sent)
            self._kept.pop(id(written), None)

    def notify(self) -> None:
        """Wake :meth:`wait_sent`: the queue was written, or the connection is gone."""
        with self._sent:
            self._sent.notify_all()

    def wait_sent(self, timeout: float, connected: Callable[[], bool]) -> bool:
        """Block until every message queued so far has been written (True), at most
        ``timeout`` seconds; False at once while not ``connected()`` (nothing leaves then),
        and in a fork child (its copy of the parent's link has no thread)."""
        if os.getpid() != self._pid:
            return False
        deadline = time.monotonic() + timeout
        with self._sent:
            while self._queue and connected():
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return False
                self._sent.wait(remaining)
            return not self._queue
