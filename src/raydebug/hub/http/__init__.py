"""The hub's HTTP side, on the client port: h11 requests and the page's WebSocket.

``api`` serves one request: it checks it, then answers it from a route table; ``exchange``
reads the request and writes the answer with h11; ``host_check`` refuses a request not meant
for this hub (DNS rebinding), ``login`` one without the client token (and sets the page's
cookie). ``routes`` holds the hub's routes, one method each; the listings a client waits on
long-poll through ``long_poll``. ``upgrade`` turns a request into a WebSocket, which
``websocket`` (wsproto) turns into the byte stream a DAP client connection reads.

May import: ``raydebug.hub.net``, ``raydebug.hub.registry``, ``raydebug.hub.processes``,
``raydebug.hub.clients.cluster_sessions``, ``raydebug.hub.snapshot_store``,
``raydebug.protocol``, ``raydebug.errors``, ``raydebug.session``, ``raydebug.selectors``,
``raydebug.stack_tree``, ``raydebug.web``.
"""
