"""Proxy caches, sans-IO: plain objects a SimPy model or a replay loop can both drive.

Both caches store *objects* (any hashable key, e.g. a workload's ``obj`` id or an SSL-splitting
payload digest) with a size in bytes, and count hits, misses and bytes. The paper placed no
limit on the proxy cache (:class:`InfiniteCache`); :class:`LRUCache` bounds it by bytes for
the cache-size questions the paper leaves to the literature.

    >>> c = LRUCache(capacity=150)
    >>> c.request("a", 60), c.request("b", 60), c.request("a", 60)
    (False, False, True)
    >>> c.request("c", 60), "b" in c, c.used      # b was least recently used: evicted
    (False, False, 120)
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Hashable
from dataclasses import dataclass

__all__ = ["CacheStats", "InfiniteCache", "LRUCache"]


@dataclass
class CacheStats:
    """Counters of a cache; ``hit_bytes / (hit_bytes + miss_bytes)`` is its byte hit rate."""

    hits: int = 0
    misses: int = 0
    hit_bytes: int = 0
    miss_bytes: int = 0

    @property
    def byte_hit_rate(self) -> float:
        total = self.hit_bytes + self.miss_bytes
        return self.hit_bytes / total if total else 0.0


class InfiniteCache:
    """A cache that never evicts."""

    def __init__(self) -> None:
        self._sizes: dict[Hashable, int] = {}
        self.stats = CacheStats()

    def __contains__(self, key: Hashable) -> bool:
        return key in self._sizes

    def __len__(self) -> int:
        return len(self._sizes)

    @property
    def used(self) -> int:
        """Bytes stored."""
        return sum(self._sizes.values())

    def insert(self, key: Hashable, size: int) -> None:
        """Store an object (warming the cache); does not count as a request."""
        self._sizes[key] = size

    def request(self, key: Hashable, size: int) -> bool:
        """Look up ``key``; on a miss, store it. Returns ``True`` on a hit."""
        if key in self._sizes:
            self.stats.hits += 1
            self.stats.hit_bytes += size
            return True
        self.stats.misses += 1
        self.stats.miss_bytes += size
        self._sizes[key] = size
        return False


class LRUCache:
    """Least-recently-used eviction, bounded by total bytes (``capacity``).

    An object larger than the capacity is never stored.
    """

    def __init__(self, capacity: int) -> None:
        if capacity < 0:
            raise ValueError(f"capacity must be >= 0 bytes, got {capacity}")
        self.capacity = capacity
        self.used = 0
        self._lru: OrderedDict[Hashable, int] = OrderedDict()
        self.stats = CacheStats()

    def __contains__(self, key: Hashable) -> bool:
        return key in self._lru

    def __len__(self) -> int:
        return len(self._lru)

    def insert(self, key: Hashable, size: int) -> None:
        """Store (or refresh) an object, evicting least-recently-used ones to make room."""
        if key in self._lru:
            self.used -= self._lru.pop(key)
        if size > self.capacity:
            return
        while self.used + size > self.capacity:
            _, old = self._lru.popitem(last=False)
            self.used -= old
        self._lru[key] = size
        self.used += size

    def request(self, key: Hashable, size: int) -> bool:
        """Look up ``key`` (refreshing it); on a miss, store it. Returns ``True`` on a hit."""
        if key in self._lru:
            self._lru.move_to_end(key)
            self.stats.hits += 1
            self.stats.hit_bytes += size
            return True
        self.stats.misses += 1
        self.stats.miss_bytes += size
        self.insert(key, size)
        return False
