"""The hub: an asyncio server on the head node that lists sessions and routes debuggers.

``server`` holds all the hub's state on one :class:`Hub` and accepts connections;
``registry`` (processes and their sessions: their ``entries``, each with its JSON),
``processes`` (asking live processes for stacks and pauses) and ``cluster_breakpoints``
(the breakpoints every process arms) and ``snapshot_store`` (the snapshots processes sent,
kept after them) hang off it;
``net`` and ``tls_server`` are the listeners' helpers; ``busy_poll`` is the standalone
hub's event loop selector, which polls for an answer that is due. Subpackages: ``agents``
(the agents' links in: handshakes, control and data connections), ``clients`` (a DAP client
from its first bytes to its relay) and ``http`` (HTTP and the page's WebSocket on the client
port).
"""

from .server import Hub, HubConfig

__all__ = ["Hub", "HubConfig"]
