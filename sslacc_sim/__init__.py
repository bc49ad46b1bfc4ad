"""SSLACC: a clustered TLS accelerator whose connections survive node failures (SimPy model).

The model runs the real :mod:`tls12` server and client objects over the byte-accurate TCP of
:mod:`netsim.tcp`; the cluster mirrors each connection's exported state to a second node
(cluster, then commit) and that node takes the connection over when the owner dies.

* :mod:`sslacc_sim.params`: :class:`ClusterParams`, every constant with its unit;
* :mod:`sslacc_sim.cluster`: nodes, LAN, keepalives, master, bucket table, join and leave;
* :mod:`sslacc_sim.tcpside`: buckets, fingered ISNs, port choice, gates, TCP takeover;
* :mod:`sslacc_sim.checkpoint`: the cluster update (:class:`Checkpoint`) and its wire form;
* :mod:`sslacc_sim.relay`: cluster-then-commit, the owner's process, takeover;
  :mod:`sslacc_sim.relayconn` its per-connection record, :mod:`sslacc_sim.takeover` the
  new owner's side, :mod:`sslacc_sim.handoff` the state a new mirror gets from the owner
  (a joining node before it mirrors, the replacement of a mirror that died);
* :mod:`sslacc_sim.updates`: the owner -> mirror update channel, aggregation, mirror faults;
* :mod:`sslacc_sim.endpoints`: the origin server and the real ``tls12`` test client;
* :mod:`sslacc_sim.sessions`: the cluster-replicated session store (resumption on any node);
* :mod:`sslacc_sim.model_load`: the cluster under handshake and bulk load (Figures 28/29);
* :mod:`sslacc_sim.errors`: :class:`SslaccError`, the root of every exception of the package;
* :mod:`sslacc_sim.experiments`: the figures as DataFrames (``variant="model"`` / ``"measured"``);
* :mod:`sslacc_sim.aio`: what touches the clock, sockets or the kernel -- the cost measurement
  (``python -m sslacc_sim.measure``) and the real two-node failover on Linux (``aio.linux``).
"""

from .checkpoint import Checkpoint
from .cluster import BucketChange, Cluster, ClusterError, Lan, Node
from .endpoints import Origin, TlsClient
from .errors import SslaccError
from .params import DEFAULT_CLUSTER_COSTS, ClusterCosts, ClusterParams
from .relay import Relay, RelayConn
from .sessions import ClusterSessionStore
from .tcpside import (
    ClusterTcpConnection,
    FourTuple,
    Gate,
    RstGuard,
    ack_is_fingered,
    bucket_of,
    fingered_isn,
    relay_port,
)
from .updates import MirrorFault, UpdateChannel

__all__ = [
    "DEFAULT_CLUSTER_COSTS", "BucketChange", "Checkpoint", "Cluster", "ClusterCosts",
    "ClusterError", "ClusterParams", "ClusterSessionStore", "ClusterTcpConnection", "FourTuple",
    "Gate", "Lan", "MirrorFault", "Node", "Origin", "Relay", "RelayConn", "RstGuard", "SslaccError",
    "TlsClient",
    "UpdateChannel", "ack_is_fingered", "bucket_of", "fingered_isn", "relay_port",
]
