"""Which local user a loopback TCP connection comes from (Linux: sock_diag, /proc/net/tcp).

The kernel knows every TCP socket of this network namespace with its owner's uid. The
client's end of a connection to the hub is the socket whose *local* address is the peer
address the hub sees and whose *remote* address is the hub's own end. A socket's owner is
the user who created it: an SSH forward's belongs to the logged-in user (sshd's session
process), a port forwarder's to whoever runs it.

Two ways to ask, the same answer: a netlink ``sock_diag`` query for exactly that socket
(what ``ss`` uses), and the tables /proc/net/tcp and tcp6 (the row with that local and
remote address). The tables are read whole, which is slow on a busy host (see
``docs/design.md#peer-owner``), so they are the fallback where netlink is not allowed.

Where neither answers (not Linux; no such socket: the client is gone already, or lives in
another network namespace), the owner is unknown: :func:`owner_uid` returns None and the
caller decides (the hub then asks for its client token).

Addresses in the tables: IPv4 as the 32-bit value in host byte order, ``%08X``; IPv6 as four
such 32-bit words; ports ``%04X``. The uid is the eighth column.
"""

from __future__ import annotations

import errno
import ipaddress
import socket
import struct
import sys
from collections.abc import Callable

TABLES = ("/proc/net/tcp", "/proc/net/tcp6")
UID_COLUMN = 7

Address = tuple[str, int]
ReadTable = Callable[[str], bytes | None]


def _words(packed: bytes) -> str:
    """Packed address bytes as the kernel prints them: 32-bit words in host byte order."""
    return "".join(f"{int.from_bytes(packed[i:i + 4], sys.byteorder):08X}"
                   for i in range(0, len(packed), 4))


def encode(host: str, port: int, *, ipv6: bool) -> str:
    """``host:port`` as a /proc/net/tcp (``ipv6=False``) or tcp6 row spells it. An IPv4
    address in tcp6 is written as its v4-mapped form (``::ffff:a.b.c.d``)."""
    address = ipaddress.ip_address(host)
    if ipv6 and isinstance(address, ipaddress.IPv4Address):
        address = ipaddress.IPv6Address(f"::ffff:{address}")
    if not ipv6 and not isinstance(address, ipaddress.IPv4Address):
        raise ValueError(f"{host} is not an IPv4 address")
    return f"{_words(address.packed)}:{port:04X}"


def row_keys(peer: Address, hub: Address) -> list[tuple[str, str]]:
    """(table, "LOCAL REMOTE") of the rows that can hold the client's end of a connection
    from ``peer`` to ``hub``: an IPv4 client may use an IPv4 or an IPv6 socket."""
    peer_ip, hub_ip = _unmapped(peer[0]), _unmapped(hub[0])
    keys = []
    if isinstance(peer_ip, ipaddress.IPv4Address) and isinstance(hub_ip, ipaddress.IPv4Address):
        keys.append((TABLES[0], f"{encode(str(peer_ip), peer[1], ipv6=False)} "
                                f"{encode(str(hub_ip), hub[1], ipv6=False)}"))
    keys.append((TABLES[1], f"{encode(str(peer_ip), peer[1], ipv6=True)} "
                            f"{encode(str(hub_ip), hub[1], ipv6=True)}"))
    return keys


def _unmapped(host: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address:
    address = ipaddress.ip_address(host.split("%", 1)[0])  # no scope id in the tables
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return address.ipv4_mapped
    return address


def find_uid(table: bytes, key: str) -> int | None:
    """The uid column of the row of ``table`` (a /proc/net/tcp text) whose local and remote
    addresses are ``key``; None without one. A search for the key, not a parse of every
    row: a hub with thousands of linked processes has thousands of rows."""
    # "  12: LOCAL REMOTE st ...": the colon after the row number anchors the local address.
    at = table.find(f": {key} ".encode())
    if at < 0:
        return None
    end = table.find(b"\n", at)
    columns = table[table.rfind(b"\n", 0, at) + 1:end if end >= 0 else None].split()
    try:
        return int(columns[UID_COLUMN])
    except (IndexError, ValueError):
        return None


def read_table(path: str) -> bytes | None:
    """A table's text; None where it does not exist (not Linux) or cannot be read."""
    try:
        with open(path, "rb") as table:
            return table.read()
    except OSError:
        return None


def table_uid(peer: Address, hub: Address, read: ReadTable = read_table) -> int | None:
    """:func:`owner_uid` from the /proc tables (``read`` is the seam tests replace)."""
    for path, key in row_keys(peer, hub):
        table = read(path)
        if table is not None and (uid := find_uid(table, key)) is not None:
            return uid
    return None


# linux/sock_diag.h, linux/inet_diag.h, linux/netlink.h
_NETLINK_SOCK_DIAG = 4
_SOCK_DIAG_BY_FAMILY = 20
_NLM_F_REQUEST = 1
_NLMSG_ERROR = 2
_NLMSG_HEADER = struct.Struct("=IHHII")  # len, type, flags, seq, pid
_DIAG_REQUEST = struct.Struct("=BBBBI")  # family, protocol, ext, pad, states
_NO_COOKIE = b"\xff" * 8  # INET_DIAG_NOCOOKIE: look the socket up by address alone
_UID_OFFSET = 4 + 48 + 12  # in inet_diag_msg: after family..retrans, the sockid, 3 counters


def _sockid(peer_ip: ipaddress.IPv4Address | ipaddress.IPv6Address, peer_port: int,
            hub_ip: ipaddress.IPv4Address | ipaddress.IPv6Address, hub_port: int) -> bytes:
    """struct inet_diag_sockid of the client's socket: source is the peer, destination the
    hub; addresses in network byte order, in 16 bytes; any interface; no cookie."""
    return (struct.pack("!HH", peer_port, hub_port) + peer_ip.packed.ljust(16, b"\0")
            + hub_ip.packed.ljust(16, b"\0") + struct.pack("=I", 0) + _NO_COOKIE)


def netlink_uid(peer: Address, hub: Address, timeout: float = 1.0) -> int | None:
    """:func:`owner_uid` by one sock_diag query; None when the kernel has no such socket.

    Raises OSError when netlink cannot be asked (not Linux, forbidden in a sandbox).
    """
    peer_ip, hub_ip = _unmapped(peer[0]), _unmapped(hub[0])
    family = socket.AF_INET if isinstance(peer_ip, ipaddress.IPv4Address) else socket.AF_INET6
    if type(peer_ip) is not type(hub_ip):
        return None  # no TCP connection joins an IPv4 and an IPv6 address
    request = (_DIAG_REQUEST.pack(family, socket.IPPROTO_TCP, 0, 0, 0xFFFFFFFF)
               + _sockid(peer_ip, peer[1], hub_ip, hub[1]))
    if not hasattr(socket, "AF_NETLINK"):
        raise OSError(errno.EAFNOSUPPORT, "no netlink on this system")
    with socket.socket(socket.AF_NETLINK, socket.SOCK_DGRAM, _NETLINK_SOCK_DIAG) as sock:
        sock.settimeout(timeout)
        sock.sendto(_NLMSG_HEADER.pack(_NLMSG_HEADER.size + len(request), _SOCK_DIAG_BY_FAMILY,
                                       _NLM_F_REQUEST, 1, 0) + request, (0, 0))
        answer = sock.recv(65536)
    _length, kind, _flags, _seq, _pid = _NLMSG_HEADER.unpack_from(answer)
    body = answer[_NLMSG_HEADER.size:]
    if kind == _NLMSG_ERROR:
        (code,) = struct.unpack_from("=i", body)
        if -code == errno.ENOENT:
            return None
        raise OSError(-code, f"sock_diag: {errno.errorcode.get(-code, -code)}")
    if kind != _SOCK_DIAG_BY_FAMILY or len(body) < _UID_OFFSET + 4:
        raise OSError(errno.EPROTO, f"sock_diag: unexpected answer of type {kind}")
    return int(struct.unpack_from("=I", body, _UID_OFFSET)[0])


def owner_uid(peer: Address, hub: Address) -> int | None:
    """The uid owning the client's socket of the TCP connection ``peer`` -> ``hub`` (the
    hub's accepted socket's peername and sockname); None when it cannot be told."""
    try:
        return netlink_uid(peer, hub)
    except ValueError:  # not an IP address
        return None
    except OSError:
        pass  # no netlink here: read the tables
    try:
        return table_uid(peer, hub)
    except ValueError:
        return None


def can_tell_owners() -> bool:
    """Whether this system tells the owners of TCP sockets at all."""
    try:
        netlink_uid(("127.0.0.1", 1), ("127.0.0.1", 1))
        return True
    except OSError:
        return read_table(TABLES[0]) is not None
