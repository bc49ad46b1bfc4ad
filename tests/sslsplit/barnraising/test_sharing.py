"""Cache sharing between volunteers (paper §5.3): the ring, O(1) lookups, poisoned peers.

The ring is tested as a pure function of its membership.  Then real components in one event
loop: an in-process splitting origin and broker, :class:`~sslsplit.aio.volunteer.Volunteer` s on
127.0.0.2-4, and ``curl`` checking the site's certificate through each volunteer in turn.
"""

from __future__ import annotations

import asyncio
import random
import shutil
import socket
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest

from sslsplit.aio import serve_payloads
from sslsplit.aio.server import SplittingServer
from sslsplit.aio.volunteer import Volunteer
from sslsplit.barnraising.aio.broker import Broker
from sslsplit.barnraising.aio.client import BrokerClient
from sslsplit.barnraising.peers import PeerRouter
from sslsplit.barnraising.registry import Registry, SiteConfig
from sslsplit.barnraising.ring import Ring
from sslsplit.wire import IDEncoding, check_payload, payload_id
from tls12.certs import generate_self_signed, write_credentials

NAME = "www.news.test"
SITE = "news/front"


# --- the ring, sans-IO --------------------------------------------------------------------


def _keys(n: int, seed: int = 5) -> list[bytes]:
    rng = random.Random(seed)
    return [rng.randbytes(32) for _ in range(n)]


def test_ring_owner_is_a_member_and_stable() -> None:
    members = [("127.0.0.2", 7000 + i) for i in range(5)]
    ring = Ring(members)
    again = Ring(reversed(members))
    for key in _keys(200):
        assert ring.owner(key) in members
        assert ring.owner(key) == again.owner(key)  # the order of the list does not matter
    assert Ring().owner(b"x") is None
    assert ring.update(members) is False and ring.update(members[:4]) is True
    with pytest.raises(ValueError):
        Ring(vnodes=0)


def test_ring_churn_moves_only_the_departed_members_keys() -> None:
    members = [f"v{i}" for i in range(10)]
    keys = _keys(5000)
    ring = Ring(members)
    before = {k: ring.owner(k) for k in keys}
    ring.update(members[1:])  # v0 leaves
    fresh = Ring(members[1:])  # an incremental update places keys as a fresh ring does
    assert all(ring.owner(k) == fresh.owner(k) for k in keys)
    ring.update(members[1:] + ["v10"])
    fresh = Ring(members[1:] + ["v10"])
    assert all(ring.owner(k) == fresh.owner(k) for k in keys)
    ring.update(members[1:])
    moved = [k for k in keys if ring.owner(k) != before[k]]
    assert moved and all(before[k] == "v0" for k in moved)
    share = len(moved) / len(keys)
    assert 0.03 < share < 0.2  # about 1/10 of the keys
    counts = {m: sum(1 for k in keys if before[k] == m) for m in members}
    assert max(counts.values()) < 2.0 * len(keys) / len(members)  # 64 vnodes: balanced


# --- real volunteers ----------------------------------------------------------------------


@dataclass
class _Site:
    tmp: Path
    body: bytes
    cert: Path
    origin: SplittingServer
    broker: Broker
    uri: str


@asynccontextmanager
async def _site(tmp: Path) -> AsyncIterator[_Site]:
    body = random.Random(53).randbytes(200_000)
    (tmp / "www").mkdir()
    (tmp / "www" / "f.bin").write_bytes(body)
    creds = generate_self_signed(NAME)
    cert = tmp / "site.pem"
    write_credentials(creds, cert, tmp / "site.key")
    origin = SplittingServer(tmp / "www", creds)
    await origin.start("127.0.0.1", 0, 0)
    config = SiteConfig(SITE, ("127.0.0.1", origin.port), ("127.0.0.1", origin.store_port),
                        (NAME,), {"memory_mb": 16}, "origin-secret")
    broker = Broker(Registry([config], ":memory:", lease_seconds=30))
    await broker.start("127.0.0.1", 0)
    try:
        yield _Site(tmp, body, cert, origin, broker, f"barnraising://127.0.0.1:{broker.port}/{SITE}")
    finally:
        await broker.close()
        await origin.close()


async def _curl(site: _Site, volunteer: Volunteer) -> bytes:
    out = site.tmp / f"out-{volunteer.host}.bin"
    proc = await asyncio.create_subprocess_exec(
        "curl", "--silent", "--show-error", "--tlsv1.2", "--tls-max", "1.2",
        "--ciphers", "AES128-SHA256", "--cacert", str(site.cert),
        "--resolve", f"{NAME}:{volunteer.port}:{volunteer.host}",
        f"https://{NAME}:{volunteer.port}/f.bin", "--output", str(out),
        stderr=asyncio.subprocess.PIPE)
    _, err = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode == 0, err.decode()
    return out.read_bytes()


async def _sharing(tmp: Path) -> None:
    async with _site(tmp) as site:
        volunteers = [Volunteer(site.uri, host=f"127.0.0.{i}") for i in (2, 3, 4)]
        try:
            for v in volunteers:
                await v.start()
            for v in volunteers:  # every ring has all three: the last joiner's list did
                await v.refresh_ring()
                assert v.ring is not None and len(v.ring.ring) == 3
            store = site.origin.store_stats
            served = []
            for v in volunteers:
                before = store.found
                assert await _curl(site, v) == site.body
                served.append(store.found - before)
            # the first download fetched each payload from the origin once (directly, or
            # through the owner); the others found every shared payload at its owner
            assert served[0] >= 10
            assert served[1] + served[2] <= 2 * 2  # at most the per-response head records
            rings = [v.ring for v in volunteers if v.ring is not None]
            lookups = sum(r.lookups for r in rings)
            assert lookups > 0 and sum(r.messages for r in rings) == lookups  # O(1): one each
            peer_hits = sum(v.proxy.hierarchy.stats.hits.get("ring", 0)
                            for v in volunteers if v.proxy is not None)
            assert peer_hits == lookups  # every peer lookup was answered by its owner
        finally:
            for v in volunteers:
                await v.stop()


@pytest.mark.interop
def test_volunteers_share_payloads_one_message_per_lookup(tmp_path: Path) -> None:
    assert shutil.which("curl"), "curl not found (apt-get install curl)"
    asyncio.run(_sharing(tmp_path))


async def _poisoned(tmp: Path) -> None:
    async with _site(tmp) as site:
        asked: list[bytes] = []

        def poison(encoding: object, ident: bytes) -> bytes:
            asked.append(ident)
            return b"poisoned " + ident  # the wrong bytes for every id

        evil = await serve_payloads(poison, "127.0.0.5", 0)  # type: ignore[arg-type]
        evil_host, evil_port = evil.sockets[0].getsockname()[:2]
        evil_client = BrokerClient(site.uri, local_host="127.0.0.5")
        await evil_client.join(4433, cache_port=evil_port)
        # the honest volunteer keeps its cache private: the evil peer owns the whole ring
        honest = Volunteer(site.uri, host="127.0.0.2", cache_port=None)
        try:
            await honest.start()
            assert honest.ring is not None and len(honest.ring.ring) == 1
            assert await _curl(site, honest) == site.body  # the client never sees the poison
            assert honest.proxy is not None
            stats, ring = honest.proxy.hierarchy.stats, honest.ring
            assert len(asked) == ring.lookups == 1  # one poisoned answer, then avoided:
            assert ring.skipped >= 10  # the other ids go straight to the origin
            assert ring.poisoned == {(evil_host, evil_port): 1}
            assert stats.poisoned == {"ring": 1}  # the poisoned entry was discarded ...
            assert stats.hits["origin"] == ring.lookups + ring.skipped  # ... the origin used
            memory = honest.proxy.hierarchy.local[0]
            kept = memory.get(IDEncoding.DIGEST_SHA256, asked[0])  # the origin's copy
            assert kept is not None and check_payload(IDEncoding.DIGEST_SHA256, asked[0], kept)
        finally:
            await honest.stop()
            await evil_client.close()
            evil.close()
            await evil.wait_closed()


@pytest.mark.interop
def test_poisoned_peer_entry_is_discarded_and_origin_used(tmp_path: Path) -> None:
    assert shutil.which("curl"), "curl not found (apt-get install curl)"
    asyncio.run(_poisoned(tmp_path))


def test_ring_shares_cover_the_hash_space() -> None:
    ring = Ring([f"v{i}" for i in range(20)])
    shares = ring.shares()
    assert set(shares) == ring.members and abs(sum(shares.values()) - 1.0) < 1e-9
    keys = _keys(20_000, seed=9)
    counts = {m: 0 for m in ring.members}
    for k in keys:
        counts[ring.owner(k)] += 1  # type: ignore[index]
    for m, share in shares.items():  # the measured fraction of keys follows the arcs
        assert abs(counts[m] / len(keys) - share) < 0.02
    assert Ring().shares() == {}


async def _dead_peer(tmp: Path) -> None:
    async with _site(tmp) as site:
        with socket.socket() as s:  # a port nobody listens on: connections are refused
            s.bind(("127.0.0.6", 0))
            dead_port = s.getsockname()[1]
        dead = BrokerClient(site.uri, local_host="127.0.0.6")
        await dead.join(4433, cache_port=dead_port)  # registered, then crashed
        honest = Volunteer(site.uri, host="127.0.0.2", cache_port=None)
        try:
            await honest.start()
            assert await _curl(site, honest) == site.body
            assert honest.ring is not None and honest.proxy is not None
            assert honest.proxy.hierarchy.stats.source_errors == honest.ring.lookups == 1
            assert honest.ring.skipped >= 10  # one failed message, then the peer is avoided
        finally:
            await honest.stop()
            await dead.close()


@pytest.mark.interop
def test_dead_peer_costs_one_message_then_is_avoided(tmp_path: Path) -> None:
    assert shutil.which("curl"), "curl not found (apt-get install curl)"
    asyncio.run(_dead_peer(tmp_path))


def test_peer_router_routes_to_owners_and_avoids_bad_peers_for_the_penalty() -> None:
    """The sans-IO decisions of cache sharing, with time passed in."""
    peers = [("127.0.0.2", 7000), ("127.0.0.3", 7000), ("127.0.0.4", 7000)]
    router = PeerRouter(peers[0], Ring(peers), penalty=30.0)
    payloads = [random.Random(i).randbytes(100) for i in range(60)]
    ids = [payload_id(IDEncoding.DIGEST_SHA256, b) for b in payloads]
    mine = [i for i in ids if router.owns(i)]
    assert 0 < len(mine) < len(ids) and all(router.route(i, 0.0) is None for i in mine)
    assert router.lookups == 0  # its own keys cost no message
    theirs = [(i, b) for i, b in zip(ids, payloads, strict=True) if not router.owns(i)]
    bad = router.route(theirs[0][0], now=0.0)
    assert bad in peers[1:] and router.lookups == 1
    assert router.check(bad, IDEncoding.DIGEST_SHA256, theirs[0][0], b"flipped", now=1.0) is False
    assert router.poisoned == {bad: 1} and router.avoided(bad, now=30.9)
    owned_by_bad = [i for i, _ in theirs if router.ring.owner(i) == bad]
    assert all(router.route(i, now=2.0) is None for i in owned_by_bad)
    assert router.skipped == len(owned_by_bad) and router.lookups == 1
    assert not router.avoided(bad, now=31.0) and router.route(owned_by_bad[0], 31.0) == bad
    ident, payload = next((i, b) for i, b in theirs if router.ring.owner(i) != bad)
    good = router.route(ident, 31.0)
    assert good is not None and good != bad
    assert router.check(good, IDEncoding.DIGEST_SHA256, ident, payload, now=31.0)
    assert router.poisoned == {bad: 1}
    router.failed(peers[2], now=40.0)  # unreachable: avoided the same way
    assert router.avoided(peers[2], 69.0) and not router.avoided(peers[2], 70.0)
    assert PeerRouter(None, Ring(peers)).owns(ids[0]) is False

