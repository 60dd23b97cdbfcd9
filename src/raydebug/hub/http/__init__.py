"""The hub's HTTP side, on the client port: h11 requests and the page's WebSocket.

``api`` reads each request with h11 and decides what it gets; ``websocket`` (wsproto) turns
the page's WebSocket into the byte stream a DAP client connection reads.

May import: ``raydebug.hub.net``, ``raydebug.protocol``, ``raydebug.errors``.
"""
