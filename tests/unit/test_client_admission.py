"""Who may use the client port: the socket owner's uid (hub/clients/peer_owner.py), the
admission rule (hub/clients/admission.py), and the HTTP Host check against DNS rebinding
(hub/http/host_check.py)."""

from __future__ import annotations

import os
import socket
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from raydebug.errors import ClientRefusedError
from raydebug.hub.clients import peer_owner
from raydebug.hub.clients.admission import ClientAdmission
from raydebug.hub.http.host_check import HubNames, misdirected

little_endian = pytest.mark.skipif(sys.byteorder != "little", reason="sample tables are x86's")

# Sample tables (samples/proc_net_tcp*): a hub as root on 127.0.0.1:5678 (0x162E), its
# listener and its accepted socket (uid 0), and the client's end, 127.0.0.1:54321 (0xD431),
# owned by uid 1001; another connection of the same client port elsewhere (uid 1002), not to
# be mistaken for it. In tcp6: a client on ::1 port 0xD432 (uid 1003), and an IPv6 socket
# connected to the IPv4 hub, v4-mapped (port 0xD433, uid 1004).
SAMPLES = Path(__file__).parent / "samples"
HUB = ("127.0.0.1", 5678)


def tables(path: str) -> bytes | None:
    name = {"/proc/net/tcp": "proc_net_tcp", "/proc/net/tcp6": "proc_net_tcp6"}.get(path)
    return (SAMPLES / name).read_bytes() if name else None


@little_endian
def test_addresses_are_spelled_as_the_kernel_prints_them():
    assert peer_owner.encode("127.0.0.1", 5678, ipv6=False) == "0100007F:162E"
    assert peer_owner.encode("::1", 54322, ipv6=True) == "00000000000000000000000001000000:D432"
    assert peer_owner.encode("127.0.0.1", 54323, ipv6=True) \
        == "0000000000000000FFFF00000100007F:D433"


@little_endian
def test_the_owner_is_the_row_whose_local_end_is_the_peer():
    assert peer_owner.table_uid(("127.0.0.1", 54321), HUB, read=tables) == 1001
    assert peer_owner.table_uid(("::1", 54322), ("::1", 5678), read=tables) == 1003
    # An IPv4 peer may be an IPv6 socket's (v4-mapped); the hub may see either form.
    assert peer_owner.table_uid(("127.0.0.1", 54323), HUB, read=tables) == 1004
    assert peer_owner.table_uid(("::ffff:127.0.0.1", 54323), HUB, read=tables) == 1004
    assert peer_owner.table_uid(("127.0.0.1", 1), HUB, read=tables) is None  # gone
    assert peer_owner.table_uid(("127.0.0.1", 54321), HUB, read=lambda path: None) is None


def test_a_row_too_short_is_no_answer():
    assert peer_owner.find_uid(b"   3: 0100007F:D431 0100007F:162E 01\n",
                               "0100007F:D431 0100007F:162E") is None


@pytest.fixture
def loopback_connection() -> Iterator[tuple[peer_owner.Address, peer_owner.Address]]:
    """A real loopback TCP connection: (the peer the server sees, the server's end)."""
    with socket.create_server(("127.0.0.1", 0)) as server, \
            socket.create_connection(server.getsockname()):
        accepted, peer = server.accept()
        with accepted:
            yield peer, accepted.getsockname()


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux socket tables")
def test_a_real_connection_belongs_to_this_user_both_ways_of_asking(
        loopback_connection: tuple[peer_owner.Address, peer_owner.Address]):
    peer, hub = loopback_connection
    assert peer_owner.netlink_uid(peer, hub) == os.geteuid()
    assert peer_owner.table_uid(peer, hub) == os.geteuid()
    assert peer_owner.owner_uid(peer, hub) == os.geteuid()
    assert peer_owner.netlink_uid(("127.0.0.1", 1), hub) is None  # no such socket
    assert peer_owner.owner_uid(("not an address", 1), hub) is None


def admission(owner: int | None, *, own_uid: int = 1000, token: bool = False) -> ClientAdmission:
    return ClientAdmission(has_client_token=token, own_uid=own_uid,
                           owner_of=lambda peer, hub: owner)


PEER = ("127.0.0.1", 54321)


def test_the_hubs_own_user_and_root_are_admitted():
    assert admission(1000).check(PEER, HUB) == 1000
    assert admission(0).check(PEER, HUB) == 0


def test_another_user_is_refused_naming_both_uids():
    rule = admission(1001)
    with pytest.raises(ClientRefusedError, match=r"\(uid 1000\) and root only; the connection "
                                                 r"from 127.0.0.1:54321 belongs to uid 1001") \
            as refused:
        rule.check(PEER, HUB)
    assert (refused.value.status, refused.value.uid) == (403, 1001)
    assert rule.refused == 1


def test_an_unknown_owner_needs_the_client_token():
    with pytest.raises(ClientRefusedError, match=r"cannot tell which local user.*--client-token"):
        admission(None).check(PEER, HUB)
    # With a client token the token decides, for everyone (the protocols ask for it).
    assert admission(None, token=True).check(PEER, HUB) is None
    assert admission(1001, token=True).check(PEER, HUB) is None


def test_unix_socket_clients_and_beyond_loopback():
    assert admission(1001).check("", "/run/hub.sock") is None  # mode 0600 keeps others out
    with pytest.raises(ClientRefusedError, match="not on loopback"):
        admission(1000).check(("10.0.0.7", 4000), ("10.0.0.1", 5678))


@pytest.mark.parametrize("host", [
    "127.0.0.1:5678", "127.0.0.1", "localhost:5678", "LOCALHOST", "localhost.", "127.1.2.3:80",
    "[::1]:5678", "[::1]", "[::ffff:127.0.0.1]:9"])
def test_loopback_names_address_the_hub_on_any_port(host: str):
    assert HubNames("127.0.0.1").names_hub(host)


@pytest.mark.parametrize("host", [
    "attacker.example:5678", "attacker.example", "127.0.0.1.attacker.example", "localhost.evil",
    "10.0.0.7:5678", "", ":5678", "[::1", "[::1]x", "127.0.0.1:port", "2130706433",
    "evil.localhost"])
def test_other_names_do_not(host: str):
    assert not HubNames("127.0.0.1").names_hub(host)


def test_the_bound_address_and_a_wildcard_bind():
    assert HubNames("10.0.0.7").names_hub("10.0.0.7:5678")
    assert not HubNames("10.0.0.7").names_hub("10.0.0.8:5678")
    assert HubNames("head-node").names_hub("head-node:5678")
    everywhere = HubNames("0.0.0.0", hostname="head-node")
    assert everywhere.names_hub("10.0.0.8:5678")  # an address cannot be rebound
    assert everywhere.names_hub("head-node:5678")
    assert not everywhere.names_hub("attacker.example:5678")


def test_requests_are_refused_unless_their_host_names_the_hub():
    names = HubNames("127.0.0.1")
    assert misdirected("HTTP/1.1", [("host", "127.0.0.1:5678")], names) is None
    assert misdirected("HTTP/1.0", [], names) is None  # HTTP/1.0 may omit Host
    status, reason = misdirected("HTTP/1.1", [("host", "attacker.example:5678")], names) \
        or (0, "")
    assert status == 421 and "attacker.example:5678" in reason
    assert misdirected("HTTP/1.1", [], names) == (400, "an HTTP/1.1 request needs a Host header")
    assert misdirected("HTTP/1.1", [("host", "localhost"), ("host", "x")], names) is not None
    # A page of another site (a later WebSocket, a form post) is refused by its Origin.
    cross_site = misdirected("HTTP/1.1", [("host", "127.0.0.1:5678"),
                                          ("origin", "https://attacker.example")], names)
    assert cross_site is not None and cross_site[0] == 403
    assert misdirected("HTTP/1.1", [("host", "127.0.0.1:5678"), ("origin", "null")],
                       names) is not None
    assert misdirected("HTTP/1.1", [("host", "localhost:5678"),
                                    ("origin", "http://localhost:5678")], names) is None
