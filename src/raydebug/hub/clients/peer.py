"""The client as the cluster attach sees it: a small interface, so that
:mod:`.cluster_attach` depends on what it uses and not on the client connection (which starts
it: no import cycle), and a test can give it a scripted client.
"""

from __future__ import annotations

from typing import Any, Protocol

from ...protocol import Event, Message, Request


class ClientPeer(Protocol):
    """One DAP client connection, for whoever answers it (:class:`.stream.ClientStream`
    is the real one)."""

    @property
    def peer_host(self) -> str | None:
        """The client's IP address; None on a Unix socket."""

    async def next_client_message(self) -> Message:
        """The client's next message; raises :class:`~raydebug.errors.PeerClosed` when it
        has gone, :class:`~raydebug.errors.RemoteProtocolError` on malformed input."""

    def respond(self, request: Request, body: dict[str, Any] | None = None) -> None:
        """Answer ``request`` successfully."""

    def fail(self, request: Request, text: str) -> None:
        """Answer ``request`` with an error the client shows to the user."""

    def send_event(self, event: Event) -> None:
        """Send an event the hub made."""

    def send_request(self, request: Request) -> None:
        """Send a reverse request (its response is read and ignored)."""

    def say_now(self, text: str) -> None:
        """A line on the client's debug console, without waiting for it to be sent."""
