"""Takeover: what the cluster does with a connection when its bucket changes hands.

The part of :mod:`sslacc_sim.relay` that runs on the *mirror* side, as a mixin of
:class:`~sslacc_sim.relay.Relay`.  When the master moves a bucket (:class:`BucketChange`)
every open connection of it is looked at once:

* a new **owner** takes over (:meth:`Takeover._take_over`): it imports the connection's
  last checkpoint into a fresh ``ServerConnection`` -- the whole exported state, or for a
  compact checkpoint the keys, with the queued response records re-sealed from the origin
  (:meth:`Takeover._restore_compact`, byte-identical because tls12 derives CBC IVs from the
  exported state) -- installs the clustered TCP state and starts the owner's loop from a
  ``takeover`` checkpoint.  Without a checkpoint it accepts the connection only on the
  client's fingered ACK (Figure 3); otherwise it resets it after 2MSL of silence
  (:meth:`Takeover._reset_later`);
* a new **mirror** under a pending commit gets that update again (or, with no mirror
  left, the owner commits unmirrored);
* a **handoff** announced or ended (a join, :attr:`BucketChange.handoff`) goes to
  :class:`~sslacc_sim.handoff.Handoff` first;
* a new mirror in place of one that died or was found unfit then gets the newest state of
  every other open connection too, idle ones included (:class:`~sslacc_sim.handoff.Handoff`
  again, after the pending updates above, which it does not send twice).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import simpy
from simpy.events import ProcessGenerator

from tls12 import ServerConfig, ServerConnection
from tls12.state import Progress, import_connection

from .checkpoint import Checkpoint
from .cluster import BucketChange, Cluster, Node
from .endpoints import Origin
from .params import ClusterParams
from .state import IDLE, CheckpointLabel, HandshakeProgress
from .tcpside import RstGuard, ack_is_fingered

if TYPE_CHECKING:
    from .relayconn import RelayConn

__all__ = ["Takeover"]


class Takeover:
    """Bucket changes of a :class:`~sslacc_sim.relay.Relay` (module docstring)."""

    env: simpy.Environment
    cluster: Cluster
    params: ClusterParams
    origin: Origin
    server_config: Callable[[int, int], ServerConfig]
    secret: bytes
    conns: list[RelayConn]
    guards: dict[int, RstGuard]
    resets: list[tuple[float, int]]
    _serve: Callable[..., Any]
    _message: Callable[..., tuple[bytes, bool]]
    _send_update: Callable[..., None]
    _handoff_change: Callable[[BucketChange], None]
    _remirror_change: Callable[[BucketChange], None]

    def _on_change(self, change: BucketChange) -> None:
        self._handoff_change(change)             # a join's handoff (sslacc_sim.handoff)
        for conn in self.conns:
            if conn.bucket != change.bucket or conn.closed:
                continue
            for m in [m for m in conn.sent_full if m != change.mirror]:
                del conn.sent_full[m]            # a former mirror may miss updates: no base
            if change.owner != conn.handler:
                new = self.cluster.node(change.owner)
                if new.alive:
                    self._take_over(conn, new)
            elif conn.pending is not None and change.mirror != conn.pending_to:
                cp, _, ack = conn.pending          # the mirror changed under a pending commit
                if change.mirror is None:          # no mirror left: commit unmirrored
                    conn.pending_to = None
                    if not ack.triggered:
                        ack.succeed()
                    continue
                msg, delta = self._message(conn, change.mirror, cp)
                self._send_update(conn, self.cluster.node(conn.handler), change.mirror, cp,
                                  msg, ack, self.params.delta_apply_cpu if delta else 0.0)
        self._remirror_change(change)            # a replaced mirror (sslacc_sim.handoff)

    def _take_over(self, conn: RelayConn, node: Node) -> None:
        cp = conn.mirrored.get(node.id)
        conn.handler = node.id
        conn.latest = cp                         # what this node has (a handoff sends it)
        conn.inbox = simpy.Store(self.env)
        conn.rx = bytearray()                    # the dead node's partial record is gone
        conn.piece, conn.carry = None, []
        conn.sent_full = {}                      # the new owner has sent no mirror anything
        conn.phases[node.id] = IDLE              # and has no update under way
        # the handshake is where the checkpoint it continues from left it (a restart: nowhere);
        # every checkpoint records its progress when captured, so a mirrored one has an entry
        conn.progress = conn.progress_at[cp.number] if cp else HandshakeProgress.START
        guard = self.guards.setdefault(node.id, RstGuard(self.env, self.params.msl))
        guard.took_over(conn.bucket)
        tls = ServerConnection(self.server_config(node.id, conn.id))
        if cp is not None:
            if cp.compact:
                self._restore_compact(conn, tls, cp, node)
            else:
                import_connection(tls, cp.tls_state)
            conn.request_offset, conn.response_offset = cp.request_offset, cp.response_offset
            conn.consumed, conn.skip_in = cp.rcv_appack - len(cp.partial), cp.buffered
            conn.tcp.take_over(cp.rcv_appack, cp.out_start)
            if self.params.takeover_resend:
                conn.tcp.announce()
            how = f"checkpoint {cp.number} ({cp.label})"
        elif ack_is_fingered(self.secret, conn.four_tuple, conn.tcp.client_ack):
            conn.request_offset = conn.response_offset = conn.consumed = 0
            conn.tcp.take_over(0, 0)
            cp = Checkpoint(conn.id, -1, CheckpointLabel.FINGERED, 0, 0, 0, 0, b"")
            how = "fingered ACK"
        else:
            conn.takeovers.append((self.env.now, node.id, "unknown connection"))
            conn.ready = True
            node.spawn(self._reset_later(conn, node, guard))
            return
        conn.tls = tls
        conn.ready = True
        conn.takeovers.append((self.env.now, node.id, how))
        node.spawn(self._serve(conn, node, cp))

    def _restore_compact(self, conn: RelayConn, tls: ServerConnection, cp: Checkpoint,
                         node: Node) -> None:
        """Keys, then re-seal the checkpoint's queued records from the origin (module doc)."""
        keys = conn.mirror_keys[node.id]
        import_connection(tls, keys)
        conn.keys, conn.keys_at = keys, {node.id}
        final = Progress.from_bytes(cp.progress)
        if cp.rewind:
            total = cp.response_offset - cp.plain_start
            if cp.sizes is not None:
                sizes = cp.sizes
            else:                                # no pre-write: the mirror's own reads
                step = max(1, self.params.response_piece // 4)
                sizes = tuple(min(step, total - i) for i in range(0, total, step))
            tls.import_progress(Progress(final.read_seq,
                                         final.write_seq - cp.rewind - cp.raw_records,
                                         close_received=final.close_received))
            at = cp.plain_start
            for n in sizes:
                tls.send_data(self.origin.read(at, n))
                at += n
            conn.piece = (cp.plain_start, sizes)
        conn.carry = [(cp.raw, cp.raw_records)] if cp.raw else []
        tls.import_progress(final)               # the re-sealed records stay queued
        if cp.partial:                           # a partially ACKed record: read on from there
            tls.receive_data(cp.partial, max_records=0)
            conn.rx = bytearray(cp.partial)

    def _reset_later(self, conn: RelayConn, node: Node, guard: RstGuard) -> ProcessGenerator:
        """An unknown connection: silent for 2MSL after the takeover, then a RST."""
        try:
            while not guard.may_reset(conn.bucket):
                yield self.env.timeout(2 * self.params.msl)
            conn.closed = True
            self.resets.append((self.env.now, conn.id))
            conn.tcp.b.abort()
        except simpy.Interrupt:
            return
