"""Sans-IO protocols: DAP framing and messages, and the link's control messages.

Nothing here imports sockets, threads, asyncio or ray: it turns bytes into messages and
messages into bytes, so that the blocking agent and the asyncio hub share one implementation.
``framing`` and ``messages`` (DAP's base protocol), ``connection`` (one DAP endpoint),
``control`` and ``handshake`` (the link between an agent and the hub), ``proxy_policy`` (what
the hub forwards, rewrites, answers or refuses between a client and the debugger) with
``outstanding`` (the requests pydevd has not answered yet), ``paths`` (a client's localRoot
<-> the process's paths), ``group_policy`` (a group session: one client, every process's
threads; where each message goes, its decisions ``group_actions``) with ``group_ids`` (every
process's ids, unique for its one client), ``group_rewrite`` (a process's messages as that
client reads them), ``group_output`` (its output by whole lines), ``group_gather`` (what
the hub asked the processes and awaits), ``group_running`` (its running processes'
threads) and ``group_steps`` (step together);
``snapshot_session`` (a snapshot served as a read-only DAP session) and ``group_snapshots``
(kept ones as a group session's threads).
"""

from typing import TYPE_CHECKING

from ..lazy_names import importer
from .framing import NEED_DATA, Framer, frame

# The DAP modules are imported at first use: an agent's link speaks only ``control`` and
# ``handshake``, and would import them on a live process's start and before a first pause
# is listed (docs/design.md#agent-import).
_LATER = {"DapConnection": "connection", "mentions": "connection", "Event": "messages",
          "Message": "messages", "Request": "messages", "Response": "messages",
          "encode_message": "messages", "parse_message": "messages"}


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
