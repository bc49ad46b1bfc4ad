"""A cluster-replicated TLS session store: a session made on one node resumes on any other.

"The SSL session cache must be shared across the entire cluster" (section 4.9; section 5.2
for how): a client that comes back after its first node died still gets the abbreviated
handshake.  The paper's mirror derives the entry from the handshake updates it received; here
the node that made the session sends it to every node, so any node (not only the mirror)
can resume it.  Each node has a :class:`ClusterSessionStore`, which is a
:class:`tls12.session.SessionStore`: ``put`` (called by the server object when a full
handshake completes) keeps the session locally and sends it, serialised with
:func:`encode_session` (real bytes, real size), to every other live node over the cluster's
:class:`~sslacc_sim.cluster.Lan`; on arrival the receiving node stores it.  ``get`` and
``remove`` are local.  A node that joins later starts empty (no state transfer here).

CPU (measured costs, :class:`~sslacc_sim.params.ClusterParams`): the sending node spends
``message_cpu(size)`` per copy it builds and every receiving node one interrupt plus
``message_cpu(size)`` to parse it, as for the connection updates; the session is usable at
the receiver when the message arrives (the CPU work runs beside the connections' work and
delays it only by competing for the node's CPU).

The messages carry master secrets: on the paper's hardware the cluster LAN is private and
every message is MACed with the cluster key (``ClusterParams.msg_header`` counts the MAC).
"""

from __future__ import annotations

import simpy
from simpy.events import ProcessGenerator

from tls12.session import InMemorySessionStore, Session

from .cluster import Cluster, Node
from .sessionwire import decode_session, encode_session

__all__ = ["ClusterSessionStore", "decode_session", "encode_session"]


class ClusterSessionStore:
    """Node ``node_id``'s copy of the cluster's session table (module docstring).

    ``replicate=False`` keeps sessions on the node that made them (the control: a client
    whose node died must do a full handshake).  ``sent`` counts replication messages.
    """

    def __init__(self, cluster: Cluster, node_id: int, peers: dict[int, ClusterSessionStore],
                 replicate: bool = True, max_entries: int = 10_000) -> None:
        self.cluster = cluster
        self.node_id = node_id
        self.peers = peers
        self.replicate = replicate
        self.local = InMemorySessionStore(max_entries)
        self.sent = 0
        peers[node_id] = self

    def get(self, session_id: bytes) -> Session | None:
        return self.local.get(session_id)

    def put(self, session: Session) -> None:
        self.local.put(session)
        if not self.replicate:
            return
        me = self.cluster.node(self.node_id)
        msg = encode_session(session)
        for peer in self.cluster.nodes:
            if peer.id != self.node_id and peer.alive and peer.id in self.peers:
                store = self.peers[peer.id]
                self.sent += 1
                me.spawn(self._cpu(me, len(msg), interrupt=False))
                self.cluster.lan.send(me, peer, len(msg),
                                      store._arrived, msg)

    def _arrived(self, data: bytes) -> None:
        self.local.put(decode_session(data))
        node = self.cluster.node(self.node_id)
        node.spawn(self._cpu(node, len(data), interrupt=True))

    def _cpu(self, node: Node, size: int, interrupt: bool) -> ProcessGenerator:
        """Build (sender) or interrupt and parse (receiver) one replication message."""
        p = self.cluster.params
        try:
            with node.cpu.request() as req:
                yield req
                if interrupt:
                    node.interrupts += 1
                yield node.env.timeout(p.message_cpu(size) + (p.interrupt_cpu if interrupt
                                                              else 0.0))
        except simpy.Interrupt:
            return

    def remove(self, session_id: bytes) -> None:
        self.local.remove(session_id)
