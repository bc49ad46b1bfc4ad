"""One node's view of the cluster: keepalives heard, the master's decisions, the table by epoch.

SSLACC §4: every node sends keepalives to every other; a node that has not been heard for the
detection time is dead in the hearer's view; the *master* -- the live node with the lowest id
in its own view -- alone changes the bucket table (:class:`sslacc_sim.buckets.BucketTable`) and
sends every change to all nodes. A real cluster (unlike the SimPy model, whose nodes share one
table object) needs each node to hold its own copy: :class:`Membership` numbers every table the
master makes with an *epoch*, and a node applies a table only if its epoch is newer than the
one it holds, so that tables that arrive late or twice change nothing.

Sans-IO, in the project's shape: :meth:`Membership.heard` for each keepalive,
:meth:`Membership.handle_timer` with the current time (returns the tables to send, if this node
is the master and something changed), :meth:`Membership.receive_table` for a table from the
master (returns what this node gained and lost), :meth:`Membership.get_timer` for when to look
again. Tables travel as :func:`encode_table` / :func:`decode_table` (JSON; anything malformed
is a :class:`TableError`).
"""

from __future__ import annotations

import json
from collections.abc import Collection
from dataclasses import dataclass

from .buckets import BucketTable
from .errors import SslaccError

__all__ = ["Membership", "TableError", "TableUpdate", "Gains", "decode_table", "encode_table"]

#: Largest table accepted from the wire (buckets; the paper's cluster uses 1024).
MAX_BUCKETS = 1 << 16


class TableError(SslaccError, ValueError):
    """A table from another node that is malformed or inconsistent."""


@dataclass(frozen=True, slots=True)
class TableUpdate:
    """A table the master made: send ``data`` (its wire form) to every node."""

    epoch: int
    data: bytes
    reason: str


@dataclass(frozen=True, slots=True)
class Gains:
    """What applying a newer table changed for this node."""

    epoch: int
    owned: tuple[int, ...]
    """Buckets this node owns now and did not before (take them over, then serve)."""
    lost: tuple[int, ...]
    """Buckets this node owned and does not any more (stop serving them first)."""
    mirrored: tuple[int, ...]
    """Buckets this node mirrors now and did not before."""


def encode_table(epoch: int, table: BucketTable) -> bytes:
    """The wire form of a table (members, unfit nodes, owner and mirror of each bucket)."""
    return json.dumps({"epoch": epoch, "members": table.members, "unfit": sorted(table.unfit),
                       "owner": table.owner, "mirror": table.mirror},
                      separators=(",", ":")).encode()  # fmt: skip


def _ints(value: object, what: str, *, allow_none: bool = False) -> list[int | None]:
    if not isinstance(value, list):
        raise TableError(f"{what} is not a list")
    for v in value:
        if v is None and allow_none:
            continue
        if not isinstance(v, int) or isinstance(v, bool) or v < 0:
            raise TableError(f"{what} holds {v!r}, not a node id")
    return value


def decode_table(data: bytes) -> tuple[int, BucketTable]:
    """Inverse of :func:`encode_table`; the table must be consistent (every owner a member, every
    mirror a fit member other than the owner, or ``None``)."""
    try:
        doc = json.loads(data)
    except (ValueError, RecursionError) as exc:
        raise TableError(f"a table that is not JSON: {exc!r}"[:200]) from None
    if not isinstance(doc, dict):
        raise TableError("a table that is not an object")
    epoch = doc.get("epoch")
    if not isinstance(epoch, int) or isinstance(epoch, bool) or epoch < 0:
        raise TableError("a table without a valid epoch")
    members = [m for m in _ints(doc.get("members"), "members") if m is not None]
    unfit = {m for m in _ints(doc.get("unfit"), "unfit") if m is not None}
    owner = [o for o in _ints(doc.get("owner"), "owner") if o is not None]
    mirror = _ints(doc.get("mirror"), "mirror", allow_none=True)
    if not members or len(set(members)) != len(members) or members != sorted(members):
        raise TableError("members must be distinct node ids in order")
    if not 0 < len(owner) <= MAX_BUCKETS or len(mirror) != len(owner):
        raise TableError("owner and mirror must list the same buckets")
    if not unfit <= set(members):
        raise TableError("an unfit node that is not a member")
    for o, m in zip(owner, mirror, strict=True):
        if o not in members or (m is not None and (m not in members or m == o or m in unfit)):
            raise TableError(f"bucket owned by {o} mirrored by {m}: not a consistent table")
    table = BucketTable(1, len(owner))
    table.members[:] = members
    table.unfit |= unfit
    table.owner[:] = owner
    table.mirror[:] = mirror
    return epoch, table


class Membership:
    """Node ``me``'s view (module docstring). ``n`` nodes start as members, ``buckets`` buckets
    laid out as :class:`BucketTable` lays them out; a node unheard for ``detection_time``
    seconds is dead in this view."""

    def __init__(self, me: int, n: int, buckets: int, detection_time: float, now: float) -> None:
        if not 0 <= me < n:
            raise ValueError(f"node {me} is not one of 0..{n - 1}")
        if detection_time <= 0:
            raise ValueError("detection_time must be positive")
        self.me = me
        self.detection_time = detection_time
        self.table = BucketTable(n, buckets)
        self.epoch = 0
        # every node counts as heard at the start: a death is declared only after a silence
        self.last_seen: dict[int, float] = {m: now for m in range(n) if m != me}

    def heard(self, node: int, now: float) -> None:
        """A keepalive from ``node`` arrived."""
        if node != self.me:
            self.last_seen[node] = max(now, self.last_seen.get(node, now))

    def view(self, now: float) -> list[int]:
        """The nodes alive in this view (this node included), in id order."""
        horizon = now - self.detection_time
        return sorted({n for n, t in self.last_seen.items() if t >= horizon} | {self.me})

    def is_master(self, now: float) -> bool:
        """This node has the lowest id of its view."""
        return self.view(now)[0] == self.me

    def get_timer(self) -> float | None:
        """When the next member may be declared dead (``None``: no other member)."""
        others = [self.last_seen[m] for m in self.table.members if m in self.last_seen]
        return min(others) + self.detection_time if others else None

    def handle_timer(self, now: float, busy: Collection[int] = ()) -> list[TableUpdate]:
        """As the master: remove the members not in the view and admit the nodes that joined
        it (``busy``: buckets with connections, which a join does not move). Each change is a
        new epoch, returned to be sent to every node; a node that is not master returns []."""
        if not self.is_master(now):
            return []
        view = self.view(now)
        updates = []
        for dead in [m for m in self.table.members if m not in view]:
            self.table.remove(dead)
            self.epoch += 1
            updates.append(TableUpdate(self.epoch, encode_table(self.epoch, self.table),
                                       f"node {dead} died"))  # fmt: skip
        for new in [v for v in view if v not in self.table.members]:
            self.table.add(new, busy)
            self.epoch += 1
            updates.append(TableUpdate(self.epoch, encode_table(self.epoch, self.table),
                                       f"node {new} joined"))  # fmt: skip
        return updates

    def receive_table(self, data: bytes) -> Gains | None:
        """A table from the master (its wire form): applied if newer, else ``None``."""
        epoch, table = decode_table(data)
        if epoch <= self.epoch:
            return None
        if len(table.owner) != self.table.buckets:
            raise TableError(f"a table of {len(table.owner)} buckets, this cluster has "
                             f"{self.table.buckets}")  # fmt: skip
        before_owned = set(self.table.owned_by(self.me))
        before_mirrored = set(self.table.mirrored_by(self.me))
        self.table.members[:] = table.members
        self.table.unfit.clear()
        self.table.unfit |= table.unfit
        self.table.owner[:] = table.owner
        self.table.mirror[:] = table.mirror
        self.epoch = epoch
        owned, mirrored = set(self.table.owned_by(self.me)), set(self.table.mirrored_by(self.me))
        return Gains(epoch, tuple(sorted(owned - before_owned)),
                     tuple(sorted(before_owned - owned)),
                     tuple(sorted(mirrored - before_mirrored)))  # fmt: skip
