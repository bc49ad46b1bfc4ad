"""SSLACC: a clustered TLS accelerator whose connections survive node failures (SimPy model).

The model runs the real :mod:`tls12` server and client objects over the byte-accurate TCP of
:mod:`netsim.tcp`; the cluster mirrors each connection's exported state to a second node
(cluster, then commit) and that node takes the connection over when the owner dies.

* :mod:`sslacc_sim.params`: :class:`ClusterParams`, every constant with its unit;
* :mod:`sslacc_sim.cluster`: nodes, LAN, keepalives, master, bucket table, join and leave;
* :mod:`sslacc_sim.tcpside`: buckets, fingered ISNs, port choice, gates, TCP takeover;
* :mod:`sslacc_sim.relay`: checkpoints, the owner's process, takeover, the test client;
* :mod:`sslacc_sim.sessions`: the cluster-replicated session store (resumption on any node).
"""

from .cluster import BucketChange, Cluster, ClusterError, Lan, Node
from .params import ClusterParams
from .relay import Checkpoint, Origin, Relay, RelayConn, TlsClient
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

__all__ = [
    "BucketChange", "Checkpoint", "Cluster", "ClusterError", "ClusterParams", "ClusterSessionStore",
    "ClusterTcpConnection", "FourTuple", "Gate", "Lan", "Node", "Origin", "Relay", "RelayConn",
    "RstGuard", "TlsClient", "ack_is_fingered", "bucket_of", "fingered_isn", "relay_port",
]
