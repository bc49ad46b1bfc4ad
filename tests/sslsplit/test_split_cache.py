"""Record store pinning, cache levels, and the hierarchy's verification and miss handling."""

from __future__ import annotations

import asyncio
import hashlib
from pathlib import Path

import pytest

from sslsplit.aio import PayloadClient, PayloadServerStats, serve_payloads
from sslsplit.cache import CacheHierarchy, CacheMiss, DiskCache, MemoryCache
from sslsplit.store import RecordStore
from sslsplit.wire import IDEncoding

E = IDEncoding.DIGEST_SHA256


def ident(payload: bytes) -> bytes:
    return hashlib.sha256(payload).digest()


def test_store_pins_until_release_then_lru() -> None:
    store = RecordStore(max_unpinned_bytes=10)
    a, b = object(), object()
    store.publish(b"1", b"x" * 8, a)
    store.publish(b"2", b"y" * 8, b)
    store.publish(b"1", b"x" * 8, b)
    store.release(a)
    assert store.get(b"1") == b"x" * 8  # still pinned by b
    store.release(b)  # 16 unpinned bytes > 10: the least recently used goes
    assert store.get(b"2") is None and store.get(b"1") == b"x" * 8
    assert store.stats.evicted == 1 and store.pinned_count == 0


def test_memory_cache_lru_by_bytes() -> None:
    cache = MemoryCache(max_bytes=20)
    for i in range(4):
        cache.put(E, bytes([i]), bytes(8))
    assert len(cache) == 2 and cache.bytes == 16 and cache.evictions == 2
    assert cache.get(E, b"\x00") is None and cache.get(E, b"\x03") == bytes(8)


def test_disk_cache_round_trip(tmp_path: Path) -> None:
    cache = DiskCache(tmp_path)
    cache.put(E, ident(b"data"), b"data")
    assert DiskCache(tmp_path).get(E, ident(b"data")) == b"data"
    cache.discard(E, ident(b"data"))
    assert cache.get(E, ident(b"data")) is None


def test_hierarchy_verifies_every_level_and_falls_back_to_origin(tmp_path: Path) -> None:
    good = b"genuine payload"
    origin_store = {ident(good): good}
    evil_peer = {ident(good): b"poisoned payload"}

    async def scenario() -> None:
        stats = PayloadServerStats()
        origin = await serve_payloads(lambda e, i: origin_store.get(i), "127.0.0.1", 0, stats=stats)
        peer = await serve_payloads(lambda e, i: evil_peer.get(i), "127.0.0.1", 0)
        memory = MemoryCache(verify_on_read=True)
        memory.put(E, ident(good), b"bad in memory")
        hierarchy = CacheHierarchy(
            [memory, DiskCache(tmp_path)],
            [
                PayloadClient("127.0.0.1", peer.sockets[0].getsockname()[1], name="peer"),
                PayloadClient("127.0.0.1", origin.sockets[0].getsockname()[1], name="origin"),
            ],
        )
        assert await hierarchy.get(E, ident(good)) == good
        assert hierarchy.stats.poisoned == {"memory": 1, "peer": 1}
        assert hierarchy.stats.hits == {"origin": 1}
        assert await hierarchy.get(E, ident(good)) == good  # now from memory
        assert hierarchy.stats.hits == {"origin": 1, "memory": 1}
        with pytest.raises(CacheMiss):
            await hierarchy.get(E, ident(b"nobody has this"))
        assert stats.requests == 2 and stats.found == 1 and stats.bytes_out > len(good)
        await hierarchy.close()
        for s in (origin, peer):
            s.close()
            await s.wait_closed()

    asyncio.run(scenario())


def test_unreachable_source_is_counted_not_fatal() -> None:
    async def scenario() -> None:
        hierarchy = CacheHierarchy([MemoryCache()], [PayloadClient("127.0.0.1", 1, timeout=2, name="dead")])
        with pytest.raises(CacheMiss):
            await hierarchy.get(E, ident(b"x"))
        assert hierarchy.stats.source_errors == 1

    asyncio.run(scenario())


def test_trusted_memory_level_only_receives_checked_payloads(tmp_path: Path) -> None:
    good = b"genuine"
    disk = DiskCache(tmp_path)
    disk.put(E, ident(good), b"tampered on disk")
    origin_store = {ident(good): good}

    async def scenario() -> None:
        origin = await serve_payloads(lambda e, i: origin_store.get(i), "127.0.0.1", 0)
        memory = MemoryCache()  # trusted on read: filled only through the hierarchy
        hierarchy = CacheHierarchy([memory, disk], [PayloadClient("127.0.0.1", origin.sockets[0].getsockname()[1], name="origin")])
        assert await hierarchy.get(E, ident(good)) == good
        assert hierarchy.stats.poisoned == {"disk": 1}
        assert memory.get(E, ident(good)) == good and disk.get(E, ident(good)) == good
        await hierarchy.close()
        origin.close()
        await origin.wait_closed()

    asyncio.run(scenario())
