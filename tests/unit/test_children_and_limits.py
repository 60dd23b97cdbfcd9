"""In memory: the per-address limit counts only connections that have not proven they belong,
and a cluster session offers a bounded number of children at a time (snapshots only when
asked)."""

from __future__ import annotations

import asyncio
from typing import Any

from raydebug.hub.clients.cluster_attach import OFFER_WINDOW, ClusterAttach
from raydebug.hub.clients.cluster_sessions import ClusterSessions
from raydebug.hub.clients.snapshot_view import KEPT_OFFERED
from raydebug.hub.net import PeerLimit
from raydebug.hub.registry import Registry
from raydebug.hub.snapshot_store import SnapshotStore
from raydebug.process_record import ProcessRecord
from raydebug.protocol import Event, Request
from raydebug.session import PausedThread
from raydebug.snapshots.format import ExceptionInfo, FrameCapture, Snapshot


def test_a_vouched_connection_stops_counting_and_can_be_revoked():
    limit = PeerLimit(2, "client", "--max-client-connections")
    first, second = limit.admit("10.0.0.1"), limit.admit("10.0.0.1")
    assert first is not None and second is not None
    assert limit.admit("10.0.0.1") is None and limit.refused == 1
    first.vouch()
    first.vouch()  # once only
    third = limit.admit("10.0.0.1")
    assert third is not None
    assert limit.statistics() == {"counted": 2, "vouched": 1, "limit": 2, "refused": 1}
    first.revoke()  # its attach failed: it counts again, even over the limit
    assert limit.statistics()["counted"] == 3 and limit.statistics()["vouched"] == 0
    for admission in (first, second, third):
        admission.close()
        admission.close()  # idempotent
    assert limit.statistics() == {"counted": 0, "vouched": 0, "limit": 2, "refused": 1}
    assert limit.admit(None) is not None  # Unix socket peers are not limited


class FakeParentClient:
    """A scripted :class:`~raydebug.hub.clients.peer.ClientPeer`: what a ClusterAttach sees."""

    def __init__(self) -> None:
        self.peer_host = "127.0.0.1"
        self.offers: list[Request] = []
        self.said: list[str] = []
        self.offered = asyncio.Condition()
        self._incoming: asyncio.Queue[Request] = asyncio.Queue()

    def respond(self, request: Request, body: dict[str, Any] | None = None) -> None:
        pass

    def fail(self, request: Request, text: str) -> None:
        pass

    def send_event(self, event: Event) -> None:
        pass

    def send_request(self, request: Request) -> None:
        self.offers.append(request)

    def say_now(self, text: str) -> None:
        self.said.append(text)

    async def next_client_message(self) -> Request:
        return await self._incoming.get()

    def leave(self) -> None:
        self._incoming.put_nowait(Request(seq=99, command="disconnect"))


def test_a_cluster_session_offers_a_window_of_children_and_offers_a_failed_one_again():
    async def scenario() -> None:
        registry = Registry()
        processes = []
        for number in range(OFFER_WINDOW + 10):
            process = registry.add_process(ProcessRecord(number, "h"), f"peer{number}",
                                           lambda message: None)
            await registry.add_session(process, PausedThread(
                id=f"s{number}", pid=number, host="h", file="f.py", line=1, function="f",
                since=float(number)))
            processes.append(process)
        client = FakeParentClient()
        parents = ClusterSessions()
        parent = ClusterAttach(client, registry, parents,  # type: ignore[arg-type]
                               Request(seq=1, command="attach", arguments={"name": "x"}))
        serving = asyncio.ensure_future(parent.run())

        async def offered(count: int) -> list[str]:
            for _ in range(100):
                await asyncio.sleep(0)
            assert len(client.offers) == count, [o.arguments for o in client.offers]
            return [o.arguments["configuration"]["raydebug"]["session"]
                    for o in client.offers]

        assert await offered(OFFER_WINDOW) == [f"s{n}" for n in range(OFFER_WINDOW)]
        children = [object() for _ in range(3)]
        for number, child in enumerate(children):  # three children attach: three more
            await registry.attach(registry.get(f"s{number}"), child)
        assert (await offered(OFFER_WINDOW + 3))[-3:] == [f"s{OFFER_WINDOW + n}"
                                                          for n in range(3)]
        await registry.detach(processes[0], children[0])  # its attach failed
        await offered(OFFER_WINDOW + 3)  # the window is full
        await registry.attach(registry.get("s3"), object())  # a place: s0 again, oldest first
        assert (await offered(OFFER_WINDOW + 4))[-1] == "s0"
        parents.tell("127.0.0.1", "refused")
        parents.tell("127.0.0.1", "refused")  # a flood is not repeated line by line
        parents.tell("10.0.0.9", "not this parent's address")
        assert client.said == ["refused"]
        client.leave()
        await asyncio.wait_for(serving, 5)
        assert not parents.is_live(parent._key)  # it left: no child belongs to it

    asyncio.run(scenario())


def kept_snapshot(number: int) -> Snapshot:
    return Snapshot(f"x{number:012x}", "exception", float(number),
                    {"pid": number, "host": "h", "task_name": "train"}, "MainThread",
                    ExceptionInfo("ValueError", "bad"), [FrameCapture("f", "/f.py", 3)])


def test_a_cluster_session_offers_snapshots_only_when_asked():
    async def scenario(arguments: dict[str, Any]) -> list[dict[str, Any]]:
        store = SnapshotStore()
        for number in range(KEPT_OFFERED + 2):
            store.add(kept_snapshot(number))
        client = FakeParentClient()
        parent = ClusterAttach(client, Registry(), ClusterSessions(),  # type: ignore[arg-type]
                               Request(seq=1, command="attach", arguments=arguments), store)
        serving = asyncio.ensure_future(parent.run())
        for _ in range(100):
            await asyncio.sleep(0)
        store.add(kept_snapshot(100))  # taken while the parent is there
        for _ in range(100):
            await asyncio.sleep(0)
        client.leave()
        await asyncio.wait_for(serving, 5)
        return [offer.arguments["configuration"] for offer in client.offers]

    assert asyncio.run(scenario({"name": "x"})) == []
    offers = asyncio.run(scenario({"name": "x", "raydebug": {"snapshots": True,
                                                             "token": "t"}}))
    # The newest kept ones, then the one taken after the attach.
    assert [o["raydebug"]["session"] for o in offers] == [
        kept_snapshot(n).id for n in [*range(2, KEPT_OFFERED + 2), 100]]
    assert offers[-1]["name"] == "snapshot: train [ValueError] (h, pid 100)"
    assert offers[-1]["raydebug"]["token"] == "t" and offers[-1]["raydebug"]["parent"]


def test_a_burst_of_snapshots_is_offered_a_window_at_a_time():
    async def scenario() -> None:
        store = SnapshotStore()
        client = FakeParentClient()
        parents = ClusterSessions()
        parent = ClusterAttach(client, Registry(), parents,  # type: ignore[arg-type]
                               Request(seq=1, command="attach",
                                       arguments={"raydebug": {"snapshots": True}}), store)
        serving = asyncio.ensure_future(parent.run())

        async def offered(count: int) -> list[str]:
            for _ in range(100):
                await asyncio.sleep(0)
            snapshot_offers = [o for o in client.offers
                               if o.arguments["configuration"]["name"].startswith("snapshot")]
            assert len(snapshot_offers) == count
            return [o.arguments["configuration"]["raydebug"]["session"]
                    for o in snapshot_offers]

        await offered(0)  # none kept at the attach
        for number in range(OFFER_WINDOW + 5):  # then a job fails on many ranks at once
            store.add(kept_snapshot(number))
        first = await offered(OFFER_WINDOW)
        for snapshot_id in first[:3]:  # three children attach: three more places
            parents.child_attached(parent._key, snapshot_id)
        assert (await offered(OFFER_WINDOW + 3))[-3:] == [
            kept_snapshot(OFFER_WINDOW + n).id for n in range(3)]
        client.leave()
        await asyncio.wait_for(serving, 5)

    asyncio.run(scenario())
