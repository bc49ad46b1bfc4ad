"""The bucket table: which node owns and which mirrors each bucket of connections (SSLACC §4).

Every packet of a connection hashes, by its 4-tuple, into one of ``buckets`` buckets; each
bucket has an *owner* (serves its connections, holds their working state) and a *mirror* (holds
the copy that cluster-then-commit keeps, takes the bucket over when the owner dies). The
*master* is the lowest-id live member; it alone changes the table, and every change is a list
of ``(bucket, old owner)`` pairs that the caller broadcasts.

The rules (the paper's §4, as the SimPy model :class:`sslacc_sim.cluster.Cluster` and the real
cluster on Linux, :mod:`sslacc_sim.aio.linux.buckets`, both apply them through this class):

* at the start bucket ``b`` belongs to node ``b mod n``; a bucket's mirror is the next member
  after its owner (in id order, round the ring) that is *fit* (not reported as a mirror that
  fails to acknowledge updates);
* a death: each bucket of the dead node goes to its mirror (the node that holds its state),
  then every bucket gets the mirror the rule above gives in the smaller ring;
* a join: the newcomer takes *idle* buckets (no connection in them, ``busy`` says which are
  not) until it holds an even share -- moving a busy bucket would need its connections moved;
* an unfit mirror: every bucket it mirrors gets the next fit member as its mirror.

Sans-IO: no clock, no I/O; the lists :attr:`owner`, :attr:`mirror` and :attr:`members` are
changed in place, so a holder of a reference sees every change.
"""

from __future__ import annotations

from collections.abc import Collection

from .errors import SslaccError

__all__ = ["BucketTable", "ClusterError"]


class ClusterError(SslaccError, RuntimeError):
    """A cluster operation that cannot be carried out (no such node, no live node left)."""


class BucketTable:
    """Owner and mirror of each of ``buckets`` buckets over nodes ``0 .. n - 1`` (module
    docstring)."""

    def __init__(self, n: int, buckets: int) -> None:
        if n < 1:
            raise ValueError("a cluster needs at least one node")
        if buckets < 1:
            raise ValueError("a cluster needs at least one bucket")
        self.buckets = buckets
        self.members: list[int] = list(range(n))
        self.unfit: set[int] = set()
        self.owner: list[int] = [b % n for b in range(buckets)]
        self.mirror: list[int | None] = [self.next_fit(o) for o in self.owner]

    @property
    def master(self) -> int:
        """The lowest-id member."""
        return self.members[0]

    def owned_by(self, node: int) -> list[int]:
        """The buckets ``node`` owns."""
        return [b for b, o in enumerate(self.owner) if o == node]

    def mirrored_by(self, node: int) -> list[int]:
        """The buckets ``node`` mirrors."""
        return [b for b, m in enumerate(self.mirror) if m == node]

    def next_fit(self, owner: int) -> int | None:
        """The mirror of a bucket of ``owner``: the next member after it that is fit (``None``
        when it is alone)."""
        ring = self.members
        at = ring.index(owner)
        for step in range(1, len(ring)):
            candidate = ring[(at + step) % len(ring)]
            if candidate not in self.unfit:
                return candidate
        return None

    def remove(self, dead: int) -> list[tuple[int, int]]:
        """``dead`` left the cluster (died or left gracefully): its buckets go to their
        mirrors, every bucket gets its new mirror. Returns the changed ``(bucket, old owner)``
        pairs (a bucket whose owner stayed appears with that owner when its mirror changed)."""
        if dead not in self.members:
            raise ClusterError(f"node {dead} is not a member")
        self.members.remove(dead)
        if not self.members:
            raise ClusterError("no live node left")
        moved = []
        for b in range(self.buckets):
            if self.owner[b] == dead:
                heir = self.mirror[b]
                self.owner[b] = (heir if heir is not None and heir in self.members
                                 else self.members[b % len(self.members)])  # fmt: skip
                moved.append((b, dead))
        gone = {b for b, _ in moved}
        for b in range(self.buckets):
            old_mirror = self.mirror[b]
            self.mirror[b] = self.next_fit(self.owner[b])
            if old_mirror != self.mirror[b] and b not in gone:
                moved.append((b, self.owner[b]))
        return moved

    def add(self, new: int, busy: Collection[int] = ()) -> list[tuple[int, int]]:
        """``new`` joins: it takes idle buckets (not in ``busy``) up to an even share; every
        bucket gets its mirror in the larger ring. Returns the moved ``(bucket, old owner)``
        pairs."""
        if new in self.members:
            raise ClusterError(f"node {new} is already a member")
        self.members.append(new)
        self.members.sort()
        share = self.buckets // len(self.members)
        moved: list[tuple[int, int]] = []
        for b in range(self.buckets):
            if len(moved) >= share:
                break
            if b not in busy and self.owner[b] != new:
                moved.append((b, self.owner[b]))
                self.owner[b] = new
        for b in range(self.buckets):
            self.mirror[b] = self.next_fit(self.owner[b])
        return moved

    def mark_unfit(self, mirror: int) -> list[tuple[int, int]] | None:
        """``mirror`` fails to acknowledge updates: every bucket it mirrors gets another
        mirror. ``None`` when there is nothing to do (already unfit, or not a member)."""
        if mirror in self.unfit or mirror not in self.members:
            return None
        self.unfit.add(mirror)
        moved = []
        for b in range(self.buckets):
            if self.mirror[b] == mirror:
                self.mirror[b] = self.next_fit(self.owner[b])
                moved.append((b, self.owner[b]))
        return moved
