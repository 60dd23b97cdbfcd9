"""What the link asks of the agent that owns it: the seam between the two.

The link calls these on the link thread; a test gives the link an owner of its own
(``tests/unit/test_link_reconnect.py``) and so runs it without pydevd.
"""

from __future__ import annotations

import socket
from typing import Any, Protocol

from ...protocol.control import (
    CancelPause,
    CollectStacks,
    ControlMessage,
    Pause,
    Register,
    Resume,
    SessionStarted,
)


class LinkOwner(Protocol):
    """What the link asks of the agent; called on the link thread."""

    def registration(self) -> Register | None:
        """What the link sends after ``Identify`` on each connect (None: not a live
        process)."""

    def live_sessions(self) -> list[SessionStarted]:
        """This process's sessions, registered again on each connect."""

    def collect_stacks(self, request: CollectStacks) -> ControlMessage: ...
    def pause(self, request: Pause) -> ControlMessage: ...
    def cancel_pause(self, request: CancelPause) -> ControlMessage: ...
    def resume(self, request: Resume) -> ControlMessage: ...
    def arm_breakpoints(self, breakpoints: dict[str, Any]) -> None: ...

    def prepare_client(self) -> None:
        """Make the debugger ready for a client (raises: it cannot start)."""

    def serve_client(self, sock: socket.socket) -> None:
        """Give the debugger a data connection's socket (raises: it refused it)."""

    def on_client_attached(self) -> None: ...
    def on_client_ready(self) -> None: ...
    def on_client_detached(self) -> None: ...
    def on_hub_closing(self, reason: str) -> None: ...
