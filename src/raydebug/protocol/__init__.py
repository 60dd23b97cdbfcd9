"""Sans-IO protocols: DAP framing and messages, and raydebug's worker channel.

Nothing here imports sockets, asyncio or ray, nor starts a thread (``control`` takes one
lock: its message types are made on first use, from any thread): it turns bytes into
messages and messages into bytes, so that the blocking agent and the asyncio hub share one
implementation.
``framing`` and ``messages`` (DAP's base protocol), ``connection`` (one DAP endpoint),
``control`` and ``handshake`` (the agent <-> hub channel), ``proxy_policy`` (what the hub
forwards, rewrites, answers or refuses between a client and pydevd) with ``outstanding``
(the requests pydevd has not answered yet), ``paths`` (a client's localRoot <-> the
worker's paths).
"""

from typing import TYPE_CHECKING

from ..lazy_names import importer
from .framing import NEED_DATA, Framer, frame

# The DAP modules are imported at first use: an agent's link speaks only ``control`` and
# ``handshake`` (``messages`` and ``connection`` were ~3 ms of a live process's start).
_LATER = {**dict.fromkeys(("DapConnection", "mentions"), "connection"),
          **dict.fromkeys(("Event", "Message", "Request", "Response", "encode_message",
                           "parse_message"), "messages")}


__getattr__ = importer(__name__, _LATER, globals())


if TYPE_CHECKING:
    from .connection import DapConnection, mentions
    from .messages import Event, Message, Request, Response, encode_message, parse_message

__all__ = [
    "NEED_DATA",
    "DapConnection",
    "Event",
    "Framer",
    "Message",
    "Request",
    "Response",
    "encode_message",
    "frame",
    "mentions",
    "parse_message",
]
