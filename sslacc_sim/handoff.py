"""Handoff: the owner sends a bucket's state to a node before (or as) it becomes the mirror.

The part of :mod:`sslacc_sim.relay` that runs on the *owner* when a bucket gets a new mirror
that holds none of its connections, as a mixin of :class:`~sslacc_sim.relay.Relay`.  Two
events give a bucket such a mirror: a node *joins* and re-forms the ring, or the bucket's
mirror *dies* (or is found unfit) and the master names the next node.  In both the owner
sends the new mirror the newest checkpoint of every open connection of the bucket
(:meth:`Handoff._transfer`, one helper for both): otherwise the new mirror holds nothing of
a connection until its next update, which for an idle one (keep-alive between requests, a
slow client) may be seconds away, and if the owner died in that time the new mirror would
take over connections it knows nothing of and reset them.

**The transfer.**  For each open connection of the bucket the owner sends
``RelayConn.latest`` (the newest checkpoint it captured: what the bucket's mirror has or is
getting) as a *full* update -- never a delta, since the new mirror holds no base to apply
one to; for a compact checkpoint the keys ride along -- through the same
:class:`~sslacc_sim.updates.UpdateChannel` and acknowledgement as an ordinary update.  A
connection whose pending update already goes to that node is skipped: that update is its
newest state.  A node that does not acknowledge within ``ClusterParams.update_timeout`` is
reported unfit (:meth:`~sslacc_sim.cluster.Cluster.report_unfit_mirror`) and the master
stops using it: a join's handoff is cancelled (the old mirror stays), a replacement mirror is
replaced in turn and the re-send starts again at the next one.

**A join** (``ClusterParams.mirror_handoff``):

1. **The master holds the old mirror.**  A busy bucket keeps its old mirror (which holds
   the state, and stays the one that takes over) and the master announces a *handoff* to
   the newcomer (:attr:`~sslacc_sim.cluster.BucketChange.handoff`, see
   :mod:`sslacc_sim.cluster`).
2. **The owner freezes the bucket and sends the state.**  On the announcement every
   connection of the bucket stops *starting* checkpoints (:meth:`Handoff._handoff_gate`,
   before the capture, so no output is held any longer than that); an update already under
   way finishes with the old mirror as usual.  Then the transfer.
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
newcomer that does not acknowledge a transfer is reported unfit, which cancels the handoff,
so a silent newcomer freezes a bucket for ``update_timeout`` at most.  A bucket with no open
connection is handed over at once.

**A mirror that died** (``ClusterParams.mirror_resend``; also one that left, or that the
master found unfit).  The master names the new mirror at once -- there is no old mirror
left to hold the state meanwhile -- and the change says which mirror it replaced
(:attr:`~sslacc_sim.cluster.BucketChange.old_mirror`).  The owner that hears such a change
for a bucket it still owns re-sends every open connection's state there
(:meth:`Handoff._remirror_change`), *without freezing the bucket*.  The table already names
the new mirror, so every update captured from then on goes there too, behind the re-sent
state (on the same path, in order: a later update, or a delta against the re-sent state,
arrives after it), and commits only on the new mirror's acknowledgement; an update
captured between the master's change and the owner hearing it went there before the
re-send and is no newer than the re-sent state, and one that was being built for the dead
mirror goes to the new one instead (:meth:`~sslacc_sim.relay.Relay._checkpoint`).  So the
new mirror ends up with each connection's newest state whatever the order.  There is no
old mirror through which a commit could leave the new one behind, which is what the join's
freeze is for; a freeze here would hold busy connections' output for the transfer and make
nothing safer.

**What is safe in the window.**  From the mirror's death until the master replaces it (the
detection time), and then until a connection's re-sent state reaches the new mirror, the
*owner alone* holds that connection's committed state -- the paper's single-failure
assumption: one failure at a time is survived, a second one inside this window is not
guaranteed to be.  Cluster-then-commit still holds throughout: a busy connection's commit
waits for an acknowledgement (from the dead mirror: none, until the master replaces it and
the pending update goes to the new one), so no output is released that the surviving
mirror could not reproduce; an idle connection releases nothing.  What the window risks is
only the owner dying too: the new mirror then resets, as unknown, the connections whose
re-sent state had not arrived, and takes over the others from their newest state.  The
window for an idle connection is thus the detection time plus the transfer, instead of the
detection time plus the time until its next update (unbounded: a keep-alive connection may
wait minutes).  The transfer took 1.5 ms for four connections mid-handshake (4.7 KB each
on the wire) and 0.7 ms for four compact ones (1.9 KB each, keys included) in
``tests/sslacc_sim/test_remirror.py``.  The owner waits for the acknowledgements only to
report a silent new mirror; any later change of the bucket's owner or mirror ends that
wait (``resending``).
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
    """Join handoffs and re-sends to a replaced mirror, of a
    :class:`~sslacc_sim.relay.Relay` (module docstring)."""

    env: simpy.Environment
    cluster: Cluster
    params: ClusterParams
    conns: list[RelayConn]
    updates: UpdateChannel
    #: bucket -> (the newcomer it is being handed to, an event that fires when it ends)
    frozen: dict[int, tuple[int, simpy.Event]]
    #: bucket -> (owner, the new mirror its states are being re-sent to, an event that fires
    #: when a later change makes that moot)
    resending: dict[int, tuple[int, int, simpy.Event]]
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
        master."""
        try:
            if (yield from self._transfer(bucket, node, newcomer, ended)):
                self.cluster.mirror_ready(bucket, newcomer, node.id)
        except simpy.Interrupt:
            return

    def _remirror_change(self, change: BucketChange) -> None:
        """A table change heard: end a re-send that the change makes moot (another owner or
        mirror); start one if the master replaced a dead or unfit mirror of a bucket whose
        owner stayed (``ClusterParams.mirror_resend``)."""
        b, old, new = change.bucket, change.old_mirror, change.mirror
        held = self.resending.get(b)
        if held is not None and held[:2] != (change.owner, new):
            del self.resending[b]
            held[2].succeed()
        replaced = (old is not None and old != new
                    and (old not in self.cluster.members or old in self.cluster.unfit))
        if (not self.params.mirror_resend or not replaced or new is None
                or change.owner != change.old_owner or b in self.resending):
            return
        owner = self.cluster.node(change.owner)
        if owner.alive:
            ended = self.env.event()
            self.resending[b] = (owner.id, new, ended)
            owner.spawn(self._remirror(b, owner, new, ended))

    def _remirror(self, bucket: int, node: Node, mirror: int,
                  ended: simpy.Event) -> ProcessGenerator:
        """Re-send ``mirror`` the state of every open connection of ``bucket``; no freeze, no
        report to the master when done (module docstring)."""
        try:
            yield from self._transfer(bucket, node, mirror, ended)
        except simpy.Interrupt:
            return
        held = self.resending.get(bucket)
        if held is not None and held[2] is ended:
            del self.resending[bucket]

    def _transfer(self, bucket: int, node: Node, to: int,
                  ended: simpy.Event) -> ProcessGenerator:
        """Send node ``to`` the newest checkpoint of every open connection of ``bucket`` that
        ``node`` owns, except one whose pending update already goes there (that update is
        its newest state); wait for every acknowledgement, reporting ``to`` unfit (once) if
        they take longer than ``update_timeout``.  Returns whether all were acknowledged
        before ``ended`` fired."""
        acks = [self._send_state(conn, node, to) for conn in self.conns
                if conn.bucket == bucket and conn.handler == node.id and not conn.closed
                and conn.latest is not None
                and not (conn.pending is not None and conn.pending_to == to)]
        sent = self.env.all_of(acks)
        reported = False
        while not sent.triggered:
            yield sent | ended | self.env.timeout(self.params.update_timeout)
            if ended.triggered:
                return False                     # cancelled or re-targeted: not ours
            if not sent.triggered and not reported:
                reported = True
                self.cluster.report_unfit_mirror(to, node.id)
        return True

    def _send_state(self, conn: RelayConn, node: Node, to: int) -> simpy.Event:
        """One full update of the connection's newest checkpoint to node ``to``: the whole
        state, never a delta, with the keys if it is compact."""
        cp = conn.latest
        assert cp is not None
        conn.sent_full.pop(to, None)             # no base: the whole state, not a delta
        conn.keys_at.discard(to)                 # a compact state is useless without keys
        msg, _ = self._message(conn, to, cp)
        ack = self.env.event()
        pending_to = conn.pending_to             # the transfer is not the pending commit:
        self._send_update(conn, node, to, cp, msg, ack, 0.0)
        conn.pending_to = pending_to             # keep whom that commit waits for
        return ack
