"""The update channel: cluster updates from owners to mirrors, their acknowledgements, batching.

Scenario: every cluster-then-commit step of :mod:`sslacc_sim.relay` hands one encoded
:class:`~sslacc_sim.checkpoint.Checkpoint` to :meth:`UpdateChannel.send`, addressed to the
bucket's mirror, with a SimPy event to trigger when the mirror has acknowledged it.  The
channel puts real messages on the cluster's :class:`~sslacc_sim.cluster.Lan` and charges the
CPU work of both ends (:class:`~sslacc_sim.params.ClusterParams`):

* the receiving node takes one *interrupt* (``interrupt_cpu``) per message and parses each
  update in it (``message_cpu(size)``, plus the update's own ``extra_cpu``: rebuilding the
  state from a handshake delta); then it stores the updates and sends one
  acknowledgement message back (8 bytes plus 8 per update acknowledged);
* the owner takes one interrupt per acknowledgement message, then every update it
  acknowledges is committed (its event triggers).

**Aggregation** (``ClusterParams.aggregate``, the "agg" line of Figure 28).  Section 5.8 of
the paper found that most of the clustering overhead was spent in interrupt handlers for
cluster message arrival, and that "aggregating multiple message sends into a single larger
message" fixed it.  With ``aggregate`` on, the first update bound from a node to a mirror
opens a batch; every update from that node to that mirror (from any connection) in the next
``aggregate_window`` seconds joins it; then the batch leaves as one message
(:func:`encode_batch`: one header, one interrupt at the mirror, one acknowledgement message
with one interrupt back).  Each connection still waits for the acknowledgement of its *own*
update before it commits: aggregation trades up to ``aggregate_window`` of latency per step
for fewer messages and interrupts, and cluster-then-commit still holds.

**A mirror that stops acknowledging** (alive for keepalives, silent for updates: a hung
cluster service).  :meth:`~sslacc_sim.cluster.Node.mute_updates` makes a node drop every
update it receives; the owner's commit then waits.  The relay bounds the wait with
``ClusterParams.update_timeout``, records a :class:`MirrorFault` and reports the mirror to
the master (:meth:`~sslacc_sim.cluster.Cluster.report_unfit_mirror`, sent again until it
takes effect), which stops using it as a mirror; the new mirror gets the pending update and
the connection goes on.

``rows`` records every message: (time, kind, source, destination, updates, wire bytes,
connections), ``kind`` being ``"update"`` or ``"ack"``; :meth:`UpdateChannel.frame` is its
DataFrame and :meth:`UpdateChannel.per_connection` the share of each connection.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import pandas as pd
import simpy
from simpy.events import ProcessGenerator

from tls12.buffer import Buffer, Writer

from .cluster import Cluster, Node
from .errors import SslaccError

__all__ = ["BatchError", "MirrorFault", "UpdateChannel", "decode_batch", "encode_batch"]

#: Bytes of an acknowledgement message: a header word plus (connection, number) per update.
ACK_BASE, ACK_PER_UPDATE = 8, 8


class BatchError(SslaccError, ValueError):
    """A batch of updates cannot be encoded (no update, too many) or decoded (malformed)."""


def encode_batch(messages: list[bytes]) -> bytes:
    """Several updates in one message: a 2-byte count, then each with a 4-byte length."""
    if not 0 < len(messages) < 1 << 16:
        raise BatchError(f"a batch holds 1 to 65535 updates, not {len(messages)}")
    out = Writer()
    out.push_uint16(len(messages))
    for msg in messages:
        out.push_vector(4, msg)
    return out.getvalue()


def decode_batch(data: bytes) -> list[bytes]:
    """Inverse of :func:`encode_batch`; :class:`BatchError` (a ``ValueError``) on a short or
    over-long message, naming what is missing or left over."""
    buf = Buffer(data)
    if buf.remaining < 2:
        raise BatchError("batch shorter than its count")
    count, out = buf.pull_uint16(), []
    for _ in range(count):
        if buf.remaining < 4:
            raise BatchError("batch truncated in a length")
        n = buf.pull_uint(4)
        if n > buf.remaining:
            raise BatchError("batch truncated in an update")
        out.append(buf.pull_bytes(n))
    if count == 0:
        raise BatchError("empty batch")
    if not buf.eof():
        raise BatchError("trailing bytes after the batch")
    return out


@dataclass(frozen=True, slots=True)
class MirrorFault:
    """An owner's report: ``mirror`` did not acknowledge the update ``label`` of connection
    ``conn`` within ``waited`` seconds (``ClusterParams.update_timeout``) at ``time``."""

    time: float
    conn: int
    label: str
    mirror: int
    owner: int
    waited: float


@dataclass
class _Update:
    conn: int
    msg: bytes
    deliver: Callable[[bytes], None]
    ack: simpy.Event
    extra_cpu: float = 0.0


@dataclass
class _Batch:
    src: Node
    dst: Node
    updates: list[_Update] = field(default_factory=list)


class UpdateChannel:
    """Owner -> mirror updates and mirror -> owner acknowledgements (module docstring)."""

    def __init__(self, env: simpy.Environment, cluster: Cluster) -> None:
        self.env = env
        self.cluster = cluster
        self.params = cluster.params
        self.rows: list[tuple[float, str, int, int, int, int, tuple[int, ...]]] = []
        self._open: dict[tuple[int, int], _Batch] = {}

    def send(self, src: Node, dst_id: int, conn: int, msg: bytes,
             deliver: Callable[[bytes], None], ack: simpy.Event,
             extra_cpu: float = 0.0) -> None:
        """Send update ``msg`` of connection ``conn`` from ``src`` to node ``dst_id``.

        ``deliver(msg)`` runs at the mirror when the update arrives (it stores the state);
        ``ack`` triggers at ``src`` once the acknowledgement is back and handled;
        ``extra_cpu``: CPU seconds the mirror spends on it beyond parsing a message of its size.
        """
        update = _Update(conn, msg, deliver, ack, extra_cpu)
        dst = self.cluster.node(dst_id)
        if not self.params.aggregate:
            self._transmit(_Batch(src, dst, [update]))
            return
        key = (src.id, dst_id)
        batch = self._open.get(key)
        if batch is None:
            batch = self._open[key] = _Batch(src, dst)
            flush = self.env.timeout(self.params.aggregate_window)
            flush.callbacks.append(lambda _: self._transmit(self._open.pop(key)))
        batch.updates.append(update)

    def _transmit(self, batch: _Batch) -> None:
        src, dst, updates = batch.src, batch.dst, batch.updates
        if self.params.aggregate:
            wire = encode_batch([u.msg for u in updates])
        else:
            wire = updates[0].msg
        conns = tuple(u.conn for u in updates)
        if src.alive:
            self.rows.append((self.env.now, "update", src.id, dst.id, len(updates),
                              len(wire) + self.params.msg_header, conns))
        self.cluster.lan.send(src, dst, len(wire), lambda _: self._at_mirror(batch), wire)

    def _at_mirror(self, batch: _Batch) -> None:
        if batch.dst.updates_muted:
            return                                  # silent for updates, alive otherwise
        for u in batch.updates:
            u.deliver(u.msg)
        batch.dst.spawn(self._mirror_work(batch))

    def _mirror_work(self, batch: _Batch) -> ProcessGenerator:
        p, dst = self.params, batch.dst
        try:
            with dst.cpu.request() as req:          # one interrupt, then parse each update
                yield req
                dst.interrupts += 1
                yield self.env.timeout(p.interrupt_cpu
                                       + sum(p.message_cpu(len(u.msg)) + u.extra_cpu
                                             for u in batch.updates))
        except simpy.Interrupt:
            return
        size = ACK_BASE + ACK_PER_UPDATE * len(batch.updates)
        self.rows.append((self.env.now, "ack", dst.id, batch.src.id, len(batch.updates),
                          size + p.msg_header, tuple(u.conn for u in batch.updates)))
        self.cluster.lan.send(dst, batch.src, size,
                              lambda _: batch.src.spawn(self._at_owner(batch)))

    def _at_owner(self, batch: _Batch) -> ProcessGenerator:
        src = batch.src
        try:
            with src.cpu.request() as req:          # the acknowledgement's interrupt
                yield req
                src.interrupts += 1
                yield self.env.timeout(self.params.interrupt_cpu)
        except simpy.Interrupt:
            return
        for u in batch.updates:
            if not u.ack.triggered:
                u.ack.succeed()

    # -- metrics ----------------------------------------------------------------------------
    def frame(self) -> pd.DataFrame:
        """Every update and acknowledgement message sent (module docstring)."""
        return pd.DataFrame(self.rows, columns=["time", "kind", "src", "dst", "updates",
                                                "bytes", "conns"])

    def per_connection(self) -> dict[int, tuple[float, float]]:
        """Per connection: (messages, wire bytes), a batch shared evenly by its updates."""
        share: dict[int, list[float]] = {}
        for _, _, _, _, n, size, conns in self.rows:
            for c in conns:
                acc = share.setdefault(c, [0.0, 0.0])
                acc[0] += 1 / n
                acc[1] += size / n
        return {c: (m, b) for c, (m, b) in share.items()}
