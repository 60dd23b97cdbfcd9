"""Who may use the hub's client port: the hub's own user, root, or whoever has the token.

Every client (DAP or HTTP) can evaluate code in the processes, as the job's user, and on a
shared head node every local user can reach ``127.0.0.1``. So, with no client token set, a
loopback client is served only when its socket belongs to the hub's own uid or to root (who
can read any process's memory anyway; port forwarders such as kubectl's run as root). The
owner is read from the kernel's socket tables (:mod:`raydebug.hub.clients.peer_owner`); where it
cannot be told (not Linux, no row), the client is refused with a message naming
``--client-token``, the way in then. With a client token set, the token is the credential:
every client must send it (the DAP proxy and the HTTP API check it), whoever it is. Clients
of the Unix socket listener are admitted: its mode (0600) already keeps others out.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field
from http import HTTPStatus

from ...errors import ClientRefusedError
from ..net import is_loopback
from . import peer_owner

CLIENT_TOKEN_HINT = ("start the hub with --client-token (env RAYDEBUG_CLIENT_TOKEN) to admit "
                     "clients that present it")


@dataclass
class ClientAdmission:
    """The rule above, for one hub. ``owner_of`` is the seam tests replace."""

    has_client_token: bool
    own_uid: int = field(default_factory=os.geteuid)
    owner_of: Callable[[peer_owner.Address, peer_owner.Address], int | None] = \
        peer_owner.owner_uid
    refused: int = 0

    def check(self, peer: object, local: object) -> int | None:
        """Admit the connection whose accepted socket has peername ``peer`` and sockname
        ``local``: return the client's uid when it was looked up, else None.

        Raises :class:`ClientRefusedError` (``status`` 403, ``uid`` when known) for a
        client the hub must not serve.
        """
        if self.has_client_token or not isinstance(peer, tuple) \
                or not isinstance(local, tuple):
            return None  # the token decides; or a Unix socket (mode 0600)
        address = f"{peer[0]}:{peer[1]}"
        if not is_loopback(str(peer[0])):
            self.refused += 1
            raise ClientRefusedError(f"{address} is not on loopback and this hub has no "
                                     f"client token: {CLIENT_TOKEN_HINT}")
        uid = self.owner_of((str(peer[0]), int(peer[1])), (str(local[0]), int(local[1])))
        if uid is None:
            self.refused += 1
            raise ClientRefusedError(
                f"cannot tell which local user the connection from {address} belongs to (no "
                f"row for it in /proc/net/tcp or tcp6): {CLIENT_TOKEN_HINT}")
        if uid not in (self.own_uid, 0):
            self.refused += 1
            raise ClientRefusedError(
                f"this hub serves its own user (uid {self.own_uid}) and root only; the "
                f"connection from {address} belongs to uid {uid}", HTTPStatus.FORBIDDEN, uid)
        return uid

    def blind_spot(self) -> str | None:
        """Why loopback clients will all be refused here, or None when owners can be told."""
        if self.has_client_token or peer_owner.can_tell_owners():
            return None
        return ("this system does not list socket owners (no /proc/net/tcp): every client "
                f"will be refused; {CLIENT_TOKEN_HINT}")
