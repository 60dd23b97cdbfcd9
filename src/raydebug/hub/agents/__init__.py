"""The hub's side of the agents' links: handshakes, control connections, data connections.

``listener`` authenticates each agent (a nonce and an HMAC over it, both ways) and keeps its
control connection, read by ``control_reader``; a data connection a client asked for is
received by ``data_receiver`` and seen by the client's relay through ``data_stream``.

May import: ``raydebug.hub.registry``, ``raydebug.hub.processes``, ``raydebug.hub.net``,
``raydebug.hub.clients.cluster_attach``, ``raydebug.protocol``, ``raydebug.session``,
``raydebug.errors``.
"""
