"""The agent's link to the hub: finding it, dialling it, and serving what it asks.

``hub_link`` is the link thread (invisible to pydevd): the control connection, its
reconnect loop and its one ``selectors`` loop. It dials and authenticates every connection
with ``dial``, finds the hub through ``discovery`` (an integration installs its own), queues
what other threads post in an ``outbox``, hands each control message from the hub to its
handler through the table in ``dispatch``, and opens a data connection for each client with
``data_connection`` (over TLS through ``relay``). What it asks of the agent is ``owner``'s
protocol. It is started at the first pause or, with ``live``, at the process's start.

May import: ``raydebug.agent.config``, ``raydebug.agent.flags``, ``raydebug.agent.fork_guard``,
``raydebug.agent.report``, ``raydebug.agent.debugger.facade``, ``raydebug.protocol``,
``raydebug.errors``, ``raydebug.tls``, ``raydebug.process_record``.
"""
