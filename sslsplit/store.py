"""The server's record store: published payloads that proxies fetch on a cache miss (paper §3.5, §4.1).

Every payload the server sends as a *digest* stub is *published* here, so a
proxy that lacks it can fetch it (the miss handler).  A payload is **pinned**
while any connection that sent it is open -- the proxy may still ask for it --
and becomes evictable when the last such connection ends.  Unpinned payloads
are kept in least-recently-used order up to ``max_unpinned_bytes`` so that
proxies joining later still find popular records.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass, field

__all__ = ["RecordStore", "StoreStats"]


@dataclass
class StoreStats:
    published: int = 0
    published_bytes: int = 0
    served: int = 0
    served_bytes: int = 0
    misses: int = 0
    evicted: int = 0


@dataclass
class _Entry:
    payload: bytes
    owners: set[object] = field(default_factory=set)


class RecordStore:
    """Payloads by id, pinned per owner (a connection), LRU-bounded once unpinned."""

    def __init__(self, max_unpinned_bytes: int = 256 << 20) -> None:
        if max_unpinned_bytes < 0:
            raise ValueError("max_unpinned_bytes must be non-negative")
        self.max_unpinned_bytes = max_unpinned_bytes
        self._entries: dict[bytes, _Entry] = {}
        self._unpinned: OrderedDict[bytes, None] = OrderedDict()
        self._unpinned_bytes = 0
        self._by_owner: dict[object, dict[bytes, None]] = {}  # insertion-ordered: LRU order on release
        self.stats = StoreStats()

    def __len__(self) -> int:
        return len(self._entries)

    def __contains__(self, ident: bytes) -> bool:
        return ident in self._entries

    def publish(self, ident: bytes, payload: bytes, owner: object) -> None:
        """Make ``payload`` available under ``ident``, pinned until ``release(owner)``."""
        entry = self._entries.get(ident)
        if entry is None:
            entry = self._entries[ident] = _Entry(payload)
            self.stats.published += 1
            self.stats.published_bytes += len(payload)
        elif ident in self._unpinned:
            del self._unpinned[ident]
            self._unpinned_bytes -= len(entry.payload)
        entry.owners.add(owner)
        self._by_owner.setdefault(owner, {})[ident] = None

    def release(self, owner: object) -> None:
        """The connection ``owner`` ended: unpin what it published."""
        for ident in self._by_owner.pop(owner, ()):
            entry = self._entries[ident]
            entry.owners.discard(owner)
            if not entry.owners:
                self._unpinned[ident] = None
                self._unpinned_bytes += len(entry.payload)
        self._evict()

    def get(self, ident: bytes) -> bytes | None:
        entry = self._entries.get(ident)
        if entry is None:
            self.stats.misses += 1
            return None
        if ident in self._unpinned:
            self._unpinned.move_to_end(ident)
        self.stats.served += 1
        self.stats.served_bytes += len(entry.payload)
        return entry.payload

    def _evict(self) -> None:
        while self._unpinned_bytes > self.max_unpinned_bytes and self._unpinned:
            ident, _ = self._unpinned.popitem(last=False)
            entry = self._entries.pop(ident)
            self._unpinned_bytes -= len(entry.payload)
            self.stats.evicted += 1

    @property
    def pinned_count(self) -> int:
        return len(self._entries) - len(self._unpinned)
