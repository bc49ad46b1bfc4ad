"""Handoff: a node that joins gets a bucket's state before it becomes the bucket's mirror.

The part of :mod:`sslacc_sim.relay` that runs on the *owner* when a join re-forms the ring,
as a mixin of :class:`~sslacc_sim.relay.Relay`.  The newcomer becomes the mirror of the
buckets of the node before it, but holds nothing of their connections: if it were their
mirror at once and the owner died before each connection's next update, it would take
over connections it knows nothing of and reset them.  The design, simple and correct:

1. **The master holds the old mirror.**  A busy bucket keeps its old mirror (which holds
   the state, and stays the one that takes over) and the master announces a *handoff* to
   the newcomer (:attr:`~sslacc_sim.cluster.BucketChange.handoff`, see
   :mod:`sslacc_sim.cluster`).
2. **The owner freezes the bucket and sends the state.**  On the announcement every
   connection of the bucket stops *starting* checkpoints (:meth:`Handoff._handoff_gate`,
   before the capture, so no output is held any longer than that); an update already under
   way finishes with the old mirror as usual.  The owner sends the newcomer the newest
   checkpoint of each open connection (``RelayConn.latest``, the one the old mirror has or
   is getting), as a *full* update -- never a delta; for a compact checkpoint the keys ride
   along -- through the same :class:`~sslacc_sim.updates.UpdateChannel` and acknowledgement
   as an ordinary update.
3. **Then the switch.**  With every transfer acknowledged the owner tells the master
   (:meth:`~sslacc_sim.cluster.Cluster.mirror_ready`, sent again until it takes effect),
   which makes the newcomer the mirror and broadcasts it; the broadcast ends the freeze and
   the waiting checkpoints go to the newcomer.

Why this is enough: the freeze means nothing is captured between the transfer and the
switch, so at the switch the newcomer holds each connection's newest checkpoint (at least
what was committed; a newer one is a valid restart, as for a mirror that got an update the
owner never saw acknowledged: case 4 of the paper's section 4.8).  Before the switch the
old mirror holds everything committed.  The freeze lasts the bucket's transfers on the LAN
(one state per open connection, one after the other: about 0.35 ms for a 4 KB handshake
state at 100 Mbit/s, far less for a compact one), their acknowledgement and two LAN
messages: 1.5 ms for four connections mid-handshake in ``tests/sslacc_sim/test_join.py``.
Simpler-looking designs are not correct: switching the mirror at once leaves the newcomer
empty until each connection's next update (the gap this fixes), and transferring while
updates still commit through the old mirror leaves the newcomer behind at the switch.

Any later change of the bucket ends the freeze: the switch itself, or the master cancelling
the handoff (the owner or old mirror died, the newcomer died or was found unfit).  A
newcomer that does not acknowledge a transfer within ``ClusterParams.update_timeout`` is
reported unfit, which cancels the handoff, so a silent newcomer freezes a bucket for that
timeout at most.  A bucket with no open connection is handed over at once.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import simpy
from simpy.events import ProcessGenerator

from .cluster import BucketChange, Cluster, Node
from .params import ClusterParams

if TYPE_CHECKING:
    from .relayconn import RelayConn
    from .updates import UpdateChannel

__all__ = ["Handoff"]


class Handoff:
    """Join handoffs of a :class:`~sslacc_sim.relay.Relay` (module docstring)."""

    env: simpy.Environment
    cluster: Cluster
    params: ClusterParams
    conns: list[RelayConn]
    updates: UpdateChannel
    #: bucket -> (the newcomer it is being handed to, an event that fires when it ends)
    frozen: dict[int, tuple[int, simpy.Event]]
    _message: Callable[..., tuple[bytes, bool]]
    _send_update: Callable[..., None]

    def _handoff_change(self, change: BucketChange) -> None:
        """A table change heard: end the bucket's freeze if its handoff is over (switched,
        cancelled or re-targeted); start one if a handoff is announced."""
        held = self.frozen.get(change.bucket)
        if held is not None and held[0] != change.handoff:
            del self.frozen[change.bucket]
            held[1].succeed()
        if change.handoff is None or change.bucket in self.frozen:
            return
        owner = self.cluster.node(change.owner)
        if owner.alive:
            ended = self.env.event()
            self.frozen[change.bucket] = (change.handoff, ended)
            owner.spawn(self._hand_off(change.bucket, owner, change.handoff, ended))

    def _handoff_gate(self, conn: RelayConn) -> ProcessGenerator:
        """Wait, before capturing a checkpoint, while the connection's bucket is frozen."""
        while (held := self.frozen.get(conn.bucket)) is not None:
            yield held[1]

    def _hand_off(self, bucket: int, node: Node, newcomer: int,
                  ended: simpy.Event) -> ProcessGenerator:
        """Send ``newcomer`` the state of every open connection of ``bucket``, then tell the
        master; report the newcomer unfit if it does not acknowledge in time."""
        try:
            acks = [self._send_state(conn, node, newcomer) for conn in self.conns
                    if conn.bucket == bucket and conn.handler == node.id
                    and not conn.closed and conn.latest is not None]
            sent = self.env.all_of(acks)
            reported = False
            while not sent.triggered:
                yield sent | ended | self.env.timeout(self.params.update_timeout)
                if ended.triggered:
                    return                       # cancelled or re-targeted: not ours
                if not sent.triggered and not reported:
                    reported = True
                    self.cluster.report_unfit_mirror(newcomer, node.id)
            self.cluster.mirror_ready(bucket, newcomer, node.id)
        except simpy.Interrupt:
            return

    def _send_state(self, conn: RelayConn, node: Node, newcomer: int) -> simpy.Event:
        """One full update of the connection's newest checkpoint to ``newcomer``."""
        cp = conn.latest
        assert cp is not None
        conn.sent_full.pop(newcomer, None)       # no base: the whole state, not a delta
        msg, _ = self._message(conn, newcomer, cp)
        ack = self.env.event()
        pending_to = conn.pending_to             # the transfer is not the pending commit:
        self._send_update(conn, node, newcomer, cp, msg, ack, 0.0)
        conn.pending_to = pending_to             # keep whom that commit waits for
        return ack
