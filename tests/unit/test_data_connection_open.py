"""A client's data connection is dialled while the debugger still starts, and a start that
fails reaches the hub with its reason before the connection closes."""

from __future__ import annotations

import socket
from typing import Any

from raydebug.agent.link.data_connection import DataConnections
from raydebug.protocol.control import ControlMessage, DataConnectionFailed


class Owner:
    """The agent's side, recording what the link asked of it, and when."""

    def __init__(self, events: list[str], start_error: Exception | None = None) -> None:
        self.events = events
        self.start_error = start_error

    def prepare_client(self) -> None:
        self.events.append("prepare")
        if self.start_error is not None:
            raise self.start_error

    def serve_client(self, sock: socket.socket) -> None:
        self.events.append("serve")

    def on_client_attached(self) -> None:
        self.events.append("attached")

    def on_client_detached(self) -> None:
        self.events.append("detached")


class DataSocket:
    def __init__(self, events: list[str]) -> None:
        self.events = events

    def close(self) -> None:
        self.events.append("close")


def connections(owner: Owner, events: list[str]) -> DataConnections:
    def open_data(connection: int) -> Any:
        events.append(f"dial {connection}")
        return DataSocket(events)

    def answer(message: ControlMessage) -> None:
        assert isinstance(message, DataConnectionFailed)
        events.append(f"failed {message.channel}: {message.reason}")

    return DataConnections(owner, open_data, answer)  # type: ignore[arg-type]


def test_the_connection_is_dialled_before_waiting_for_the_debugger() -> None:
    events: list[str] = []
    connections(Owner(events), events).open(7)
    assert events == ["dial 7", "prepare", "serve", "attached"]


def test_a_failed_start_is_said_then_the_dialled_connection_closes() -> None:
    events: list[str] = []
    owner = Owner(events, RuntimeError("no helper library"))
    connections(owner, events).open(7)
    assert events[:2] == ["dial 7", "prepare"]
    assert events[2].startswith("failed 7: the debugger could not start in pid ")
    assert events[2].endswith("RuntimeError: no helper library")
    assert events[3:] == ["close"]
