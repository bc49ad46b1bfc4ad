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

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
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

# Each name is loaded on first use, not with the package: the real cluster's nodes
# (``python -m sslacc_sim.aio.linux.node``) import a few small modules of it (errors,
# buckets, membership, sessionwire) and would otherwise load the whole SimPy model with netsim,
# pandas and NumPy: 1.1 s more at start and about 50 MB more to free when a node is killed, which
# its buddy hears of only once the memory is freed (docs/sslacc-cluster.md, "Where a kill's
# gap goes now").
_HOME = {
    "Checkpoint": "checkpoint",
    **dict.fromkeys(("BucketChange", "Cluster", "ClusterError", "Lan", "Node"), "cluster"),
    **dict.fromkeys(("Origin", "TlsClient"), "endpoints"),
    "SslaccError": "errors",
    **dict.fromkeys(("DEFAULT_CLUSTER_COSTS", "ClusterCosts", "ClusterParams"), "params"),
    **dict.fromkeys(("Relay", "RelayConn"), "relay"),
    "ClusterSessionStore": "sessions",
    **dict.fromkeys(("ClusterTcpConnection", "FourTuple", "Gate", "RstGuard", "ack_is_fingered",
                     "bucket_of", "fingered_isn", "relay_port"), "tcpside"),
    **dict.fromkeys(("MirrorFault", "UpdateChannel"), "updates"),
}


def __getattr__(name: str) -> object:
    """Load a public name from its module at first use (PEP 562)."""
    home = _HOME.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{home}", __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
