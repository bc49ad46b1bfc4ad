"""Cluster membership: nodes on a LAN, keepalives, a master, 1024 buckets with owner and mirror.

Scenario (the paper's sections 3 and 3.2): ``N`` nodes share a virtual IP; every packet for it
reaches every node, and a node handles it only if the packet's bucket (:func:`~sslacc_sim.
tcpside.bucket_of`) is assigned to it.  Each bucket has an *owner* (holds the working state)
and a *mirror* (holds the mirrored state, the next live node in id order after the owner).

* Every node sends a keepalive every ``keepalive_interval`` seconds to every other node over
  the :class:`Lan` (a real message with a size, on the shared wire).
* Every node watches the keepalives; a node not heard for ``dead_after`` intervals is dead in
  its view.  The live node with the lowest id in a node's view is the *master*; only the
  master changes the bucket table.  When the master itself dies the next node becomes master
  by the same rule, without an election message.
* On a death the master gives each bucket the dead node owned to that bucket's mirror (the
  node with the state) and picks new mirrors; listeners (:meth:`Cluster.subscribe`) hear each
  change after the table's broadcast reaches them (one LAN delay).
* On a join the master moves *idle* buckets (no connection in them) to the newcomer until
  the load is even; on a graceful :meth:`Cluster.leave` the leaver's buckets move at once.
* A join also re-forms the ring, so the newcomer becomes the mirror of the buckets of the
  node before it -- but it holds none of their connections' state, and if their owner died
  now it would take over connections it knows nothing of.  So a *busy* bucket (one that has
  had a connection) keeps its old mirror, which holds the state, and the master records a
  *handoff* to the newcomer (``handoffs``; :attr:`BucketChange.handoff` tells the owner).
  The owner sends the newcomer the full state of each connection
  (:mod:`sslacc_sim.handoff`) and then says so (:meth:`Cluster.mirror_ready`); only then
  does the master make the newcomer the mirror.  Until then the old mirror is the one that takes over.  Every
  later table change keeps a handoff while it still makes sense (same owner, old mirror
  still fit, the ring still names the newcomer) and cancels it otherwise
  (``ClusterParams.mirror_handoff`` off: the newcomer is the mirror at once, the behaviour
  before).
* A bucket whose mirror died (or was found unfit, below) while its owner lives gets the
  ring's next fit member as its mirror at once: there is no old mirror left to hold the state
  meanwhile.  Each change names the mirror it replaces (:attr:`BucketChange.old_mirror`), so
  the owner knows to send the new mirror the newest state of every open connection of the
  bucket (:mod:`sslacc_sim.handoff`, ``ClusterParams.mirror_resend``).

Failures are :meth:`Node.kill`: the node stops sending and receiving at once, its pending
cluster messages are lost and its processes end.  A partial failure is
:meth:`Node.mute_updates`: the node keeps sending keepalives (nobody declares it dead) but
drops every cluster update it receives; an owner that times out waiting for it reports it
(:meth:`Cluster.report_unfit_mirror`, a message to the master), and the master stops using it
as a mirror: it picks other mirrors for its buckets and broadcasts them (``unfit``,
``mirror_faults``).

**Reports are sent until they take effect.**  A report to the master (an unfit mirror, a
handoff done) is one message without an acknowledgement: it is lost with a master that dies
before it acts, and a connection waiting on it would wait for ever.  So the reporter sends
it again every ``ClusterParams.report_interval`` seconds, to whoever is master then, until
the table shows the change (the master's actions are idempotent: a second copy changes
nothing).  A lost report thus costs at most one interval after a master that can act on
it exists (after a master's death: the detection time, then up to one interval).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import simpy
from simpy.events import ProcessGenerator

from netsim.link import Link, LinkParams, Packet, send_on

from .buckets import BucketTable, ClusterError
from .params import ClusterParams

__all__ = ["Lan", "Node", "Cluster", "BucketChange", "ClusterError"]


class Lan:
    """The cluster's wire: one shared link (bandwidth, delay), messages between nodes.

    ``messages`` and ``bytes`` count every cluster message sent (keepalives included).
    """

    def __init__(self, env: simpy.Environment, params: ClusterParams) -> None:
        self.env = env
        self.params = params
        self.link = Link(env, LinkParams(params.lan_bandwidth, params.lan_delay), "lan")
        self.messages = 0
        self.bytes = 0

    def send(self, src: Node, dst: Node, payload_size: int,
             on_arrive: Callable[[Any], object], payload: Any = None) -> None:
        """Send ``payload_size`` bytes (plus the header) from ``src`` to ``dst``.

        ``on_arrive(payload)`` runs at ``dst`` on arrival, unless either node died meanwhile.
        """
        if not src.alive:
            return
        size = payload_size + self.params.msg_header
        self.messages += 1
        self.bytes += size

        def arrive(pkt: Packet) -> None:
            if src.alive and dst.alive:      # a node that died took its messages with it
                on_arrive(pkt.payload)

        send_on((self.link,), size, arrive, payload)


class Node:
    """One accelerator: CPU and card resources, a keepalive sender and a failure detector."""

    def __init__(self, env: simpy.Environment, node_id: int, cluster: Cluster) -> None:
        self.env = env
        self.id = node_id
        self.cluster = cluster
        self.alive = True
        #: drops every cluster update it receives (alive otherwise): :meth:`mute_updates`
        self.updates_muted = False
        #: cluster messages this node took an interrupt for (updates and acknowledgements)
        self.interrupts = 0
        self.cpu = simpy.Resource(env, capacity=1)
        self.card = simpy.Resource(env, capacity=1)
        self.last_seen: dict[int, float] = {}
        self.processes: list[simpy.Process] = []
        self.spawn(self._keepalives())
        self.spawn(self._detector())

    def __repr__(self) -> str:
        return f"Node({self.id}{'' if self.alive else ', dead'})"

    def spawn(self, gen: Any) -> simpy.Process:
        """Start a process that dies with the node."""
        proc = self.env.process(gen)
        self.processes.append(proc)
        return proc

    def kill(self) -> None:
        """Fail-stop: no more sending, receiving or computing."""
        if not self.alive:
            return
        self.alive = False
        for proc in self.processes:
            if proc.is_alive and proc is not self.env.active_process:
                proc.interrupt("killed")
        self.processes.clear()

    def mute_updates(self) -> None:
        """Partial failure: keep sending keepalives, silently drop every cluster update."""
        self.updates_muted = True

    def view(self) -> list[int]:
        """Ids this node believes alive (itself included), in id order."""
        horizon = self.env.now - self.cluster.params.detection_time
        alive = {n for n, t in self.last_seen.items() if t >= horizon}
        return sorted(alive | {self.id})

    def is_master(self) -> bool:
        """The master is the live node with the lowest id in this node's view."""
        return self.alive and self.view()[0] == self.id

    def _keepalives(self) -> ProcessGenerator:
        p = self.cluster.params
        try:
            while True:
                for other in self.cluster.nodes:
                    if other is not self:
                        self.cluster.lan.send(self, other, 16, other._heard, self.id)
                yield self.env.timeout(p.keepalive_interval)
        except simpy.Interrupt:
            return

    def _heard(self, sender: int) -> None:
        self.last_seen[sender] = self.env.now

    def _detector(self) -> ProcessGenerator:
        p = self.cluster.params
        try:
            yield self.env.timeout(p.detection_time + p.keepalive_interval / 2)
            while True:
                if self.is_master():
                    self.cluster._master_check(self)
                yield self.env.timeout(p.keepalive_interval / 2)
        except simpy.Interrupt:
            return


@dataclass(frozen=True, slots=True)
class BucketChange:
    """One row of the table broadcast: ``bucket`` now owned by ``owner``, mirrored by ``mirror``."""

    bucket: int
    old_owner: int
    owner: int
    mirror: int | None
    time: float
    #: the node that becomes the mirror once the owner has sent it the bucket's state (a
    #: join, module docstring); ``None``: no handoff under way
    handoff: int | None = None
    #: the bucket's mirror before this change (when it is dead or unfit the owner re-sends
    #: the bucket's state to ``mirror``: :mod:`sslacc_sim.handoff`)
    old_mirror: int | None = None


class Cluster:
    """``n`` nodes, the bucket table and its listeners; metrics in ``changes``, ``deaths`` and
    ``mirror_faults`` ((time, node, reported by) of each node the master stopped mirroring on;
    ``unfit`` holds those nodes); ``handoffs``: busy bucket -> the newcomer that becomes its
    mirror once it holds the state (module docstring)."""

    def __init__(self, env: simpy.Environment, n: int, params: ClusterParams | None = None
                 ) -> None:
        if n < 1:
            raise ValueError("a cluster needs at least one node")
        self.env = env
        self.params = params = params if params is not None else ClusterParams()
        self.lan = Lan(env, params)
        self.nodes: list[Node] = []
        for i in range(n):
            self.nodes.append(Node(env, i, self))
        # the table's lists, changed in place by the sans-IO rules (sslacc_sim.buckets)
        self.table = BucketTable(n, params.buckets)
        self.members = self.table.members
        self.unfit = self.table.unfit
        self.owner = self.table.owner
        self.mirror = self.table.mirror
        self.busy_buckets: set[int] = set()
        self._listeners: list[Callable[[BucketChange], None]] = []
        self.changes: list[BucketChange] = []
        self.deaths: list[tuple[float, int, int]] = []   #: (time, dead node, declared by)
        self.mirror_faults: list[tuple[float, int, int]] = []
        self.handoffs: dict[int, int] = {}

    def node(self, node_id: int) -> Node:
        """The node with ``node_id``."""
        if not 0 <= node_id < len(self.nodes):
            raise ClusterError(f"no node {node_id}")
        return self.nodes[node_id]

    def subscribe(self, listener: Callable[[BucketChange], None]) -> None:
        """Call ``listener(change)`` for every bucket-table change, after the broadcast delay."""
        self._listeners.append(listener)

    def master(self) -> Node:
        """The current master: the lowest-id member."""
        return self.node(self.members[0])

    def report_unfit_mirror(self, mirror: int, reporter: int) -> None:
        """``reporter`` tells the master that ``mirror`` does not acknowledge updates.

        The report is a cluster message to the master (handled at once if ``reporter`` is
        the master); the master then re-mirrors every bucket ``mirror`` was mirroring.  It is
        sent again until the table shows ``mirror`` unfit or gone (:meth:`_tell_master`)."""
        self._tell_master(reporter, ("unfit", mirror), lambda: self._unfit(mirror, reporter),
                          lambda: mirror in self.unfit or mirror not in self.members)

    def mirror_ready(self, bucket: int, mirror: int, owner: int) -> None:
        """``owner`` tells the master that ``mirror``, the newcomer of a handoff, holds the
        state of every connection of ``bucket``: the master makes it the bucket's mirror.
        Sent again until the handoff is over (done, or cancelled by a later change)."""
        self._tell_master(owner, ("ready", bucket, mirror),
                          lambda: self._hand_over(bucket, mirror),
                          lambda: self.handoffs.get(bucket) != mirror)

    def _tell_master(self, reporter: int, what: tuple[object, ...],
                     act: Callable[[], None], done: Callable[[], bool]) -> None:
        """Send ``what`` from ``reporter`` to the master, where it runs ``act()``; then every
        ``report_interval`` seconds again, to the master of that moment, until ``done()``
        (the table shows the change) or the reporter dies."""
        src = self.node(reporter)
        if not src.alive:
            return

        def send() -> None:
            master = self.master()
            if master is src:
                act()
            else:
                self.lan.send(src, master, 16, lambda _: act(), what)

        send()
        if not done() and math.isfinite(self.params.report_interval):
            src.spawn(self._send_again(send, done))

    def _send_again(self, send: Callable[[], None], done: Callable[[], bool]
                    ) -> ProcessGenerator:
        try:
            while True:
                yield self.env.timeout(self.params.report_interval)
                if done():
                    return
                send()
        except simpy.Interrupt:
            return

    def _unfit(self, mirror: int, reporter: int) -> None:
        if self._change(lambda: self.table.mark_unfit(mirror)):
            self.mirror_faults.append((self.env.now, mirror, reporter))

    def _hand_over(self, bucket: int, mirror: int) -> None:
        """The newcomer holds the bucket's state: it is the bucket's mirror from now on."""
        if self.handoffs.get(bucket) != mirror:
            return                                 # a copy of the report, or cancelled
        del self.handoffs[bucket]
        before = list(self.mirror)
        self.mirror[bucket] = mirror
        self._broadcast([(bucket, self.owner[bucket])], before)

    # -- master actions -----------------------------------------------------------------
    def _master_check(self, master: Node) -> None:
        view = master.view()
        for dead in [m for m in self.members if m not in view]:
            self.deaths.append((self.env.now, dead, master.id))
            self._remove(dead)
        for new in [v for v in view if v not in self.members and self.nodes[v].alive]:
            self._add(new)

    def _remove(self, dead: int) -> None:
        self._change(lambda: self.table.remove(dead))

    def _add(self, new: int) -> None:
        self._change(lambda: self.table.add(new, self.busy_buckets))

    def _change(self, rule: Callable[[], list[tuple[int, int]] | None]) -> bool:
        """Apply one table rule (``None``: nothing to do), hold the busy buckets' mirrors
        (:meth:`_hold`) and broadcast what changed."""
        owners, mirrors, handoffs = list(self.owner), list(self.mirror), dict(self.handoffs)
        moved = rule()
        if moved is None:
            return False
        rows = dict(moved)
        for b in self._hold(owners, mirrors):
            rows.setdefault(b, owners[b])
        self._broadcast([(b, old) for b, old in rows.items()
                         if (self.owner[b], self.mirror[b], self.handoffs.get(b))
                         != (owners[b], mirrors[b], handoffs.get(b))], mirrors)
        return True

    def _hold(self, owners: list[int], mirrors: list[int | None]) -> list[int]:
        """After a rule: a busy bucket whose mirror by the ring rule (the owner's next fit
        member) is not the mirror it had before, while its owner stayed and that old mirror
        is still fit (or it had none), keeps the old mirror, and the ring's choice waits as
        its handoff; a handoff that no longer fits is dropped.  Returns the buckets whose
        handoff changed."""
        changed = []
        for b in sorted(self.busy_buckets):
            old, ring = mirrors[b], self.table.next_fit(self.owner[b])
            keep = (self.params.mirror_handoff and ring is not None and ring != old
                    and self.owner[b] == owners[b]
                    and (old is None or (old in self.members and old not in self.unfit)))
            if keep:
                self.mirror[b] = old
            target = ring if keep else None
            if self.handoffs.get(b) != target:
                changed.append(b)
                if target is None:
                    del self.handoffs[b]
                else:
                    self.handoffs[b] = target
        return changed

    def _broadcast(self, moved: list[tuple[int, int]], mirrors: list[int | None]) -> None:
        """Tell every listener, one LAN delay from now, of the changed ``(bucket, old owner)``
        rows; ``mirrors``: the table's mirrors before the change."""
        changes = [BucketChange(b, old, self.owner[b], self.mirror[b], self.env.now,
                                self.handoffs.get(b), mirrors[b]) for b, old in moved]
        self.changes.extend(changes)

        def deliver(_: object) -> None:
            for change in changes:
                for listener in self._listeners:
                    listener(change)

        self.env.timeout(self.params.lan_delay).callbacks.append(deliver)

    # -- join and leave -------------------------------------------------------------------
    def join(self) -> Node:
        """A new node starts sending keepalives; the master admits it on the next check."""
        node = Node(self.env, len(self.nodes), self)
        self.nodes.append(node)
        return node

    def leave(self, node_id: int) -> None:
        """Graceful leave: the node's buckets go to their mirrors now, then it stops."""
        self.deaths.append((self.env.now, node_id, node_id))
        self._remove(node_id)
        self.node(node_id).kill()
