"""The hub's DAP clients: from a client's first bytes to its relay to one process.

``admission`` decides who may use the client port (``peer_owner``: which local user a
loopback connection comes from); ``handler`` serves one DAP client (the adapter before
``attach``, choosing a session, opening the data connection), reading and writing it through
``stream``; ``relay`` runs the two pumps after attach; ``cluster_attach`` shows every paused
process as a child session, seeing the client through ``peer``; ``group_session`` serves a
group attach, one DAP session whose threads are every process's of a group;
``cluster_sessions`` holds the live cluster sessions and changes the hub's one breakpoint
set, which every linked process arms and every attached DAP session's pydevd is sent;
``snapshot_view`` serves a kept snapshot as a read-only session.

May import: ``raydebug.hub.registry``, ``raydebug.hub.entries``, ``raydebug.hub.processes``,
``raydebug.hub.cluster_breakpoints``, ``raydebug.hub.net``, ``raydebug.hub.agents``,
``raydebug.protocol``, ``raydebug.session``, ``raydebug.selectors``, ``raydebug.errors``,
``raydebug.snapshots``, ``raydebug.hub.snapshot_store``.
"""
