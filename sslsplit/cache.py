"""The proxy's pluggable cache hierarchy (paper §4.2, §5.3).

Levels are tried in order: local caches (memory LRU by bytes, an on-disk
directory), then remote payload sources (other proxies, and last the origin
server, the authority of last resort).  Every payload is checked against its
digest id before it is used or enters a trusted level: a poisoned entry is
dropped (and counted) and the search continues at the next level.  A payload
found further down is copied into the local levels above.

Where the check happens is a property of each local level
(``verify_on_read``): the on-disk directory can be changed behind the proxy's
back, so it is checked on every read; the memory level lives in the proxy's
own address space and is filled only with payloads that were just checked,
so by default it is trusted on read -- this halves the hashing on the warm
path (hashing a 16 KiB record costs more than encrypting it).  Pass
``MemoryCache(verify_on_read=True)`` to check it on every read as well.
"""

from __future__ import annotations

import os
import tempfile
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from .errors import CacheMiss
from .wire import IDEncoding, check_payload

__all__ = ["LocalCache", "PayloadSource", "PayloadKey", "MemoryCache", "DiskCache", "CacheHierarchy", "CacheMiss",
           "HierarchyStats"]


class PayloadSource(Protocol):
    """A remote level: :class:`~sslsplit.aio.PayloadClient`, or a volunteer's ring of peers."""

    name: str

    async def fetch(self, encoding: IDEncoding, ident: bytes) -> bytes | None: ...

    async def close(self) -> None: ...


PayloadKey = tuple[IDEncoding, bytes]
"""What names a payload: ``(encoding, id)`` (:class:`~sslsplit.splicer.PayloadsNeeded` gives these)."""


class LocalCache(Protocol):
    name: str
    verify_on_read: bool

    def get(self, encoding: IDEncoding, ident: bytes) -> bytes | None: ...

    def put(self, encoding: IDEncoding, ident: bytes, payload: bytes) -> None: ...

    def discard(self, encoding: IDEncoding, ident: bytes) -> None: ...


class MemoryCache:
    """An in-memory LRU bounded by the total bytes of its payloads."""

    def __init__(self, max_bytes: int = 256 << 20, name: str = "memory", *, verify_on_read: bool = False) -> None:
        if max_bytes < 0:
            raise ValueError("max_bytes must be non-negative")
        self.name = name
        self.verify_on_read = verify_on_read
        self.max_bytes = max_bytes
        self._data: OrderedDict[tuple[int, bytes], bytes] = OrderedDict()
        self.bytes = 0
        self.evictions = 0

    def __len__(self) -> int:
        return len(self._data)

    def get(self, encoding: IDEncoding, ident: bytes) -> bytes | None:
        key = (int(encoding), ident)
        payload = self._data.get(key)
        if payload is not None:
            self._data.move_to_end(key)
        return payload

    def get_many(self, keys: Sequence[PayloadKey]) -> list[bytes | None]:
        """:meth:`get` of each key, in order (the LRU order moves as with one call per key)."""
        data = self._data
        get, to_end = data.get, data.move_to_end
        out: list[bytes | None] = []
        append = out.append
        for key in keys:  # (IDEncoding, id) finds (int, id): an IntEnum hashes and compares as its int
            payload = get(key)
            if payload is not None:
                to_end(key)
            append(payload)
        return out

    def put(self, encoding: IDEncoding, ident: bytes, payload: bytes) -> None:
        key = (int(encoding), ident)
        if key in self._data or len(payload) > self.max_bytes:
            return
        self._data[key] = payload
        self.bytes += len(payload)
        while self.bytes > self.max_bytes:
            _, old = self._data.popitem(last=False)
            self.bytes -= len(old)
            self.evictions += 1

    def discard(self, encoding: IDEncoding, ident: bytes) -> None:
        old = self._data.pop((int(encoding), ident), None)
        if old is not None:
            self.bytes -= len(old)


class DiskCache:
    """Payloads as files ``DIR/<encoding>/<hex[:2]>/<hex>``, written atomically."""

    verify_on_read = True  # files can change behind the proxy's back

    def __init__(self, directory: str | Path, name: str = "disk") -> None:
        self.name = name
        self.root = Path(directory)
        self.root.mkdir(parents=True, exist_ok=True)

    def _path(self, encoding: IDEncoding, ident: bytes) -> Path:
        h = ident.hex()
        return self.root / str(int(encoding)) / h[:2] / h

    def get(self, encoding: IDEncoding, ident: bytes) -> bytes | None:
        try:
            return self._path(encoding, ident).read_bytes()
        except OSError:
            return None

    def put(self, encoding: IDEncoding, ident: bytes, payload: bytes) -> None:
        path = self._path(encoding, ident)
        if path.exists():
            return
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp")
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(payload)
            os.replace(tmp, path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise

    def discard(self, encoding: IDEncoding, ident: bytes) -> None:
        self._path(encoding, ident).unlink(missing_ok=True)


@dataclass
class HierarchyStats:
    hits: dict[str, int] = field(default_factory=dict)
    poisoned: dict[str, int] = field(default_factory=dict)
    misses: int = 0
    source_errors: int = 0

    def hit(self, level: str) -> None:
        self.hits[level] = self.hits.get(level, 0) + 1

    def poison(self, level: str) -> None:
        self.poisoned[level] = self.poisoned.get(level, 0) + 1


class CacheHierarchy:
    """Local caches, then remote sources; every payload verified against its id."""

    def __init__(self, local: Sequence[LocalCache], remote: Sequence[PayloadSource] | None = None) -> None:
        self.local = list(local)
        self.remote = list(remote or [])
        self.stats = HierarchyStats()

    def lookup_local(self, encoding: IDEncoding, ident: bytes, *, count: bool = False) -> bytes | None:
        """A verified payload from the local levels only (also what a proxy serves to its peers)."""
        for i, cache in enumerate(self.local):
            payload = cache.get(encoding, ident)
            if payload is None:
                continue
            if not cache.verify_on_read or check_payload(encoding, ident, payload):
                if count:
                    self.stats.hit(cache.name)
                for upper in self.local[:i]:
                    upper.put(encoding, ident, payload)
                return payload
            self.stats.poison(cache.name)
            cache.discard(encoding, ident)
        return None

    def lookup_local_many(self, keys: Sequence[PayloadKey], *, count: bool = False) -> list[bytes | None]:
        """:meth:`lookup_local` of each key, in order, in one call: the proxy's batch path.

        The first level answers for all keys at once when it can (:meth:`MemoryCache.get_many`);
        from the first key it misses, or whose payload fails its check, on, the keys go through
        :meth:`lookup_local` one by one -- so the payloads, the stats and (short of an eviction
        inside the run) the LRU order are those of one call per key.
        """
        if not self.local:
            return [None] * len(keys)
        first = self.local[0]
        get_many = getattr(first, "get_many", None)
        found: list[bytes | None] = (get_many(keys) if get_many is not None
                                     else [first.get(*key) for key in keys])
        verify = first.verify_on_read
        hits = 0
        for i, payload in enumerate(found):
            if payload is None or (verify and not check_payload(*keys[i], payload)):
                # a miss, or a payload that failed its check: from here on the per-key way
                found[i:] = [self.lookup_local(*key, count=count) for key in keys[i:]]
                break
            hits += 1
        if count and hits:
            self.stats.hits[first.name] = self.stats.hits.get(first.name, 0) + hits
        return found

    def put(self, encoding: IDEncoding, ident: bytes, payload: bytes) -> None:
        for cache in self.local:
            cache.put(encoding, ident, payload)

    async def get(self, encoding: IDEncoding, ident: bytes) -> bytes:
        """A payload whose id has been checked (on its way into, or out of, the level it came from)."""
        payload = self.lookup_local(encoding, ident, count=True)
        if payload is not None:
            return payload
        return await self.get_remote(encoding, ident)

    async def get_remote(self, encoding: IDEncoding, ident: bytes) -> bytes:
        """:meth:`get` without the local levels (the caller looked there already): the remote
        sources in order, the first valid payload put into every local level; CacheMiss if none."""
        for source in self.remote:
            try:
                payload = await source.fetch(encoding, ident)
            except (OSError, TimeoutError):
                self.stats.source_errors += 1
                continue
            if payload is None:
                continue
            if not check_payload(encoding, ident, payload):
                self.stats.poison(source.name)
                continue
            self.stats.hit(source.name)
            self.put(encoding, ident, payload)
            return payload
        self.stats.misses += 1
        raise CacheMiss(f"no valid payload for {encoding.name} id {ident.hex()}")

    async def close(self) -> None:
        for source in self.remote:
            await source.close()
