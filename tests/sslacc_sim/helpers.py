"""Shared pieces of the SSLACC model tests: one client through a cluster, failure hooks, checks.

:func:`run` builds a cluster (three nodes unless told), an :class:`~sslacc_sim.Origin`, a
:class:`~sslacc_sim.Relay` and a real ``tls12`` client over a 10 Mbit/s, 5 ms wire, installs a
failure hook and runs the simulation.  A hook (:data:`Kill`) is called at every phase of every
checkpoint (see :data:`sslacc_sim.relay.CheckpointHook`); :func:`kill_owner` builds the common
one.  :func:`assert_served` is the campaign's verdict: the client finished, its response is
byte-identical to the origin's, and the origin saw the request exactly once.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import simpy

from netsim.link import Duplex, LinkParams
from sslacc_sim import (
    Checkpoint,
    Cluster,
    ClusterParams,
    FourTuple,
    Origin,
    Relay,
    RelayConn,
    TlsClient,
    bucket_of,
)
from tls12 import CipherSuite, ClientConfig, ServerConfig
from tls12.testing import credentials, seeded_rng

SUITES = (CipherSuite.TLS_RSA_WITH_AES_128_CBC_SHA,)
BODY = bytes(range(256)) * 400          # 100 KiB: several response checkpoints
CLIENT, VIP = "192.0.2.9", "198.51.100.1"

Kill = Callable[[Cluster, RelayConn, Checkpoint, str], None]


@dataclass
class Run:
    client: TlsClient
    origin: Origin
    conn: RelayConn
    cluster: Cluster
    relay: Relay


def server_configs(relay_of: Callable[[], Relay] | None = None
                   ) -> Callable[[int, int], ServerConfig]:
    """``server_config(node, conn)`` for a :class:`Relay`: seeded per node and connection;
    with ``relay_of`` each node's config uses that relay's replicated session store."""

    def server_config(node: int, conn: int) -> ServerConfig:
        store = relay_of().session_store(node) if relay_of is not None else None
        return ServerConfig(credentials=credentials(), cipher_suites=SUITES,
                            rng=seeded_rng(f"node{node}/conn{conn}"), session_store=store)

    return server_config


def client_port(nodes: int, owner: int, buckets: int = 1024, first: int = 40000) -> int:
    """The first client port from ``first`` whose bucket node ``owner`` owns initially
    (the initial table gives bucket ``b`` to node ``b % nodes``)."""
    port = first
    while bucket_of(FourTuple(CLIENT, port, VIP, 443), buckets) % nodes != owner:
        port += 1
    return port


def run(kill: Kill | None = None, params: ClusterParams | None = None,
        until: float = 30.0, per_record: bool = True, timeout: float | None = 20.0,
        body: bytes = b"", nodes: int = 3, port: int = 40000,
        setup: Callable[[Cluster, Relay], None] | None = None) -> Run:
    """One GET (or POST of ``body``) through a cluster of ``nodes``; ``kill`` as the hook,
    ``setup(cluster, relay)`` called before the simulation starts."""
    env = simpy.Environment()
    cluster = Cluster(env, nodes, params or ClusterParams())
    origin = Origin(BODY)
    relay = Relay(env, cluster, origin, server_configs())
    wire = Duplex(env, LinkParams(10e6, 0.005))
    conn = relay.connect(FourTuple(CLIENT, port, VIP, 443), (wire.ab,), (wire.ba,))
    client = TlsClient(env, conn.tcp, ClientConfig(rng=seeded_rng("client"), cipher_suites=SUITES),
                       timeout=timeout, write_per_record=per_record, body=body)
    if kill is not None:
        relay.hook = lambda c, cp, phase: kill(cluster, c, cp, phase)
    if setup is not None:
        setup(cluster, relay)
    env.run(until=until)
    return Run(client, origin, conn, cluster, relay)


def kill_owner(label: str, phase: str, nth: int = 0) -> Kill:
    """Kill the connection's owner at the ``nth`` checkpoint labelled ``label``, in ``phase``."""
    seen: list[int] = []

    def kill(cluster: Cluster, conn: RelayConn, cp: Checkpoint, now: str) -> None:
        if cp.label == label and now == phase and not seen:
            if sum(1 for c in conn.checkpoints if c[1] == label) == nth + 1:
                seen.append(cp.number)
                cluster.node(conn.handler).kill()

    return kill


def assert_served(r: Run) -> None:
    """The client finished with a byte-identical response; the origin saw one request."""
    assert r.client.error is None
    assert r.client.done_at is not None
    assert bytes(r.client.response) == r.origin.response          # byte-identical
    assert [conn for conn, _ in r.origin.requests] == [r.conn.id]   # seen exactly once
    assert r.origin.requests[0][1].startswith(b"GET / HTTP/1.0\r\n")
