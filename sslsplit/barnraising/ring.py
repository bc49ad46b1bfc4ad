"""Who keeps which payload: a consistent-hashing ring over a site's live volunteers (§5.3).

Paper §5.3: volunteers of a site share their caches, so that a payload leaves the origin
once per site rather than once per volunteer.  Entries are named by the stub ids (the
payload's SHA-256), which makes every peer's answer checkable: a volunteer hashes what a peer
sent and discards it when it does not match, then asks the origin (:mod:`sslsplit.cache`).

**Ring, not DHT.**  The paper suggests a wide-area DHT (Chord-like: each node knows
O(log n) others and a lookup takes O(log n) hops).  A DHT earns its complexity when no node
can know the membership; here one can: the broker already holds the live volunteer list in
its database (it must, to answer DNS), and a lookup reply hands it out (``peers``).  So each
volunteer keeps the *whole* list and places it on a consistent-hashing ring
(Karger et al. 1997): a payload's owner is the first volunteer point clockwise from the
payload's hash.  A lookup is then **one message to one owner -- O(1)**, against O(log n) hops
for Chord, and there is no routing state to repair when volunteers churn: a join or leave
moves only the keys next to its points (about 1/n of them), and each volunteer refreshes
the list from the broker every few seconds.  The price: the list is O(n) per volunteer
(25 bytes a peer: 250 KB at 10^4 volunteers, fetched once per refresh; placing 10^4 members
costs about a second of CPU once, and 1 % churn a fraction of that, because the points of
members that stay are kept -- ``benchmarks/bench_barnraising.py`` measures both; beyond
that, deltas instead of whole lists would be the next step), and two volunteers
whose lists differ for a moment may disagree about an owner -- which costs a miss (the
payload then comes from the origin), never a wrong byte, because every answer is checked
against its id.  A malicious owner can only deny its share of keys, and the origin's
feedback loop and the broker's reports remove it.

Each member gets ``vnodes`` points (default 64), which keeps the largest share within a few
tens of percent of 1/n for small n.  The class is sans-IO: members are any hashable
values (``(host, cache_port)`` pairs in the volunteer), positions come from SHA-256.
"""

from __future__ import annotations

import bisect
import hashlib
from collections.abc import Hashable, Iterable
from typing import Generic, TypeVar

__all__ = ["Ring"]

M = TypeVar("M", bound=Hashable)


def _first(point: tuple[int, object]) -> int:
    return point[0]


def _position(data: bytes) -> int:
    return int.from_bytes(hashlib.sha256(data).digest()[:8], "big")


class Ring(Generic[M]):
    """Consistent hashing of byte keys onto ``members`` (``vnodes`` points each)."""

    def __init__(self, members: Iterable[M] = (), *, vnodes: int = 64) -> None:
        if vnodes < 1:
            raise ValueError("vnodes must be at least 1")
        self.vnodes = vnodes
        self._members: frozenset[M] = frozenset()
        self._points: list[int] = []
        self._owners: list[M] = []
        self.update(members)

    @property
    def members(self) -> frozenset[M]:
        return self._members

    def __len__(self) -> int:
        return len(self._members)

    def update(self, members: Iterable[M]) -> bool:
        """Replace the membership; return whether it changed (points are rebuilt only then)."""
        new = frozenset(members)
        if new == self._members:
            return False
        # Churn is incremental: the points of members that stay are kept (already sorted), only
        # the newcomers' are hashed, and they are spliced in by binary search and list slices.
        points, owners = self._points, self._owners
        if self._members - new:
            kept = [(p, m) for p, m in zip(points, owners, strict=True) if m in new]
            points, owners = [p for p, _ in kept], [m for _, m in kept]
        added = sorted(((_position(f"{member!r}#{i}".encode()), member)
                        for member in new - self._members for i in range(self.vnodes)),
                       key=_first)
        if len(added) * 8 > len(points):  # many newcomers (a first build): sort everything
            every = sorted([*zip(points, owners, strict=True), *added], key=_first)
            points, owners = [p for p, _ in every], [m for _, m in every]
        elif added:
            merged_points: list[int] = []
            merged_owners: list[M] = []
            start = 0
            for position, member in added:
                i = bisect.bisect_left(points, position, start)
                merged_points += points[start:i]
                merged_owners += owners[start:i]
                merged_points.append(position)
                merged_owners.append(member)
                start = i
            points = merged_points + points[start:]
            owners = merged_owners + owners[start:]
        self._members = new
        self._points, self._owners = points, owners
        return True

    def shares(self) -> dict[M, float]:
        """The fraction of the hash space (hence of the keys, on average) each member owns."""
        out: dict[M, float] = dict.fromkeys(self._members, 0.0)
        if not self._points:
            return out
        span = float(1 << 64)
        prev = self._points[-1] - (1 << 64)  # the arc before the first point wraps around
        for point, member in zip(self._points, self._owners, strict=True):
            out[member] += (point - prev) / span
            prev = point
        return out

    def owner(self, key: bytes) -> M | None:
        """The member responsible for ``key`` (a stub id), or ``None`` on an empty ring."""
        if not self._points:
            return None
        i = bisect.bisect_right(self._points, _position(key))
        return self._owners[i % len(self._owners)]
