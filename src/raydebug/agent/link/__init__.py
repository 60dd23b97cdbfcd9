"""The agent's link to the hub: finding it, dialling it, and serving what it asks.

``hub_link`` (one thread, invisible to pydevd: the control connection, its reconnect loop
and the data connections it opens for clients) finds the hub through ``discovery`` (an
integration installs its own), relays a TLS data connection to pydevd with ``relay``, and is
started at the first pause or, with ``live``, at the process's start.

May import: ``raydebug.agent.config``, ``raydebug.agent.flags``, ``raydebug.agent.fork_guard``,
``raydebug.agent.metadata``, ``raydebug.agent.report``, ``raydebug.agent.debugger.facade``,
``raydebug.protocol``, ``raydebug.errors``, ``raydebug.tls``.
"""
