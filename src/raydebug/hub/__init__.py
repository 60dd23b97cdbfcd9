"""The hub: an asyncio server on the head node that lists sessions and routes debuggers.

``server`` holds all the hub's state on one :class:`Hub` and accepts connections. Workers:
``worker_listener`` (their handshake, control and data connections; a control connection
is then read by ``control_reader``, a data connection by ``channel_receiver``),
``registry`` (processes and their sessions), ``processes`` (asking live processes for
stacks and pauses). A DAP client: ``client_connection`` (attach: the adapter before it,
choosing a session, opening the channel), ``relay`` (the two pumps after it, under
``raydebug.protocol.proxy_policy``), ``client_stream`` and ``channel_stream`` (the two byte
streams as messages), ``cluster_attach`` (one attach showing every paused process as a child
session, seeing the client through ``client_peer``) and ``cluster_breakpoints`` (the
breakpoints a cluster attach sets in every process). Around them: ``net``, ``tls_server``,
``client_admission``, ``peer_owner``, ``http_api`` (HTTP on h11) and ``websocket`` (the
page's DAP over a WebSocket).
"""

from .server import Hub, HubConfig

__all__ = ["Hub", "HubConfig"]
