"""The hub's side of the agents' links: handshakes, control connections, data connections.

``listener`` authenticates each agent (a nonce and an HMAC over it, both ways), keeps its
control connection, read by ``control_reader``, and tells the cluster's breakpoints what
processes say through a Protocol it is given (so it imports no client code), and hands the
snapshots processes send to the hub's store. A data
connection a client asked for waits in ``data_connections`` until the agent opens it; it is
received by ``data_receiver`` and seen by the client's relay through ``data_stream``.

May import: ``raydebug.hub.registry``, ``raydebug.hub.entries``, ``raydebug.hub.processes``,
``raydebug.hub.net``, ``raydebug.hub.snapshot_store``, ``raydebug.protocol``,
``raydebug.session``, ``raydebug.process_record``, ``raydebug.errors``.
"""
