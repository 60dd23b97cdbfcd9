"""The client's requests that pydevd has not answered yet, so that each gets one answer.

The DAP rule (specification, "Base protocol") is that every request gets exactly one
response. pydevd answers what reaches it; but when its process exits, is killed, or its
data connection drops, whatever the client sent in the meantime would go unanswered and the client
would wait forever (VS Code then shows the session stuck in "disconnecting"). So the relay
notes each request it forwards (:meth:`OutstandingRequests.forwarded`), crosses it off when
pydevd's response passes (:meth:`OutstandingRequests.answered`, a byte scan: the relay does
not parse pydevd's messages on its fast path), and when the data connection ends answers the rest
itself (:meth:`OutstandingRequests.take_all`).
"""

from __future__ import annotations

from .messages import Request

_REQUEST_SEQ = b'"request_seq"'
_DIGITS = frozenset(b"0123456789")


def response_to(body: bytes) -> int | None:
    """The ``request_seq`` of a response body, without parsing it; None for other messages.

    The key cannot be faked by a string value: inside a JSON string its quotes are escaped
    (``\\"request_seq\\"``), and no DAP body pydevd sends has a nested key of that name.
    """
    start = body.find(_REQUEST_SEQ)
    if start < 0:
        return None
    position = start + len(_REQUEST_SEQ)
    end = len(body)
    while position < end and body[position] in b" \t\r\n:":
        position += 1
    first = position
    while position < end and body[position] in _DIGITS:
        position += 1
    return int(body[first:position]) if position > first else None


class OutstandingRequests:
    """Requests forwarded to pydevd, by ``seq``, until their response passes."""

    def __init__(self) -> None:
        self._by_seq: dict[int, Request] = {}

    def forwarded(self, request: Request) -> None:
        self._by_seq[request.seq] = request

    def answered(self, body: bytes) -> None:
        """Cross off the request that ``body`` (a message from pydevd) answers, if any."""
        if self._by_seq:
            seq = response_to(body)
            if seq is not None:
                self._by_seq.pop(seq, None)

    def take_all(self) -> list[Request]:
        """Every request still unanswered, oldest first; afterwards there are none."""
        requests = list(self._by_seq.values())
        self._by_seq.clear()
        return requests

    def __len__(self) -> int:
        return len(self._by_seq)
