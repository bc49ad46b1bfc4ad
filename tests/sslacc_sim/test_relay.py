"""A real tls12 client through the cluster: no failure, owner killed at three points, controls."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import pytest
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
)
from tls12 import CipherSuite, ClientConfig, ServerConfig
from tls12.testing import credentials, seeded_rng

SUITES = (CipherSuite.TLS_RSA_WITH_AES_128_CBC_SHA,)
BODY = bytes(range(256)) * 400          # 100 KiB: several response checkpoints


@dataclass
class Run:
    client: TlsClient
    origin: Origin
    conn: RelayConn
    cluster: Cluster
    relay: Relay


Kill = Callable[[Cluster, RelayConn, Checkpoint, str], None]


def run(kill: Kill | None = None, params: ClusterParams | None = None,
        until: float = 30.0, per_record: bool = True, timeout: float | None = 20.0) -> Run:
    env = simpy.Environment()
    cluster = Cluster(env, 3, params or ClusterParams())
    origin = Origin(BODY)

    def server_config(node: int, conn: int) -> ServerConfig:
        return ServerConfig(credentials=credentials(), cipher_suites=SUITES,
                            rng=seeded_rng(f"node{node}/conn{conn}"))

    relay = Relay(env, cluster, origin, server_config)
    wire = Duplex(env, LinkParams(10e6, 0.005))
    conn = relay.connect(FourTuple("192.0.2.9", 40000, "198.51.100.1", 443),
                         (wire.ab,), (wire.ba,))
    client = TlsClient(env, conn.tcp, ClientConfig(rng=seeded_rng("client"), cipher_suites=SUITES),
                       timeout=timeout, write_per_record=per_record)
    if kill is not None:
        relay.hook = lambda c, cp, phase: kill(cluster, c, cp, phase)
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
    assert r.client.error is None
    assert r.client.done_at is not None
    assert bytes(r.client.response) == r.origin.response          # byte-identical
    assert [conn for conn, _ in r.origin.requests] == [r.conn.id]   # seen exactly once
    assert r.origin.requests[0][1].startswith(b"GET / HTTP/1.0\r\n")


def test_no_failure_every_step_is_clustered_before_commit() -> None:
    r = run()
    assert_served(r)
    labels = [c[1] for c in r.conn.checkpoints]
    assert labels[:6] == ["client_hello", "client_key_exchange", "change_cipher_spec",
                          "finished", "established", "data"]           # Figures 18-20
    assert labels[-2:] == ["alert_received", "eof"]                     # close_notify, FIN
    assert labels.count("response") == -(-len(r.origin.response) // 16384)
    assert r.conn.takeovers == []
    frame = r.relay.checkpoints_frame()
    assert list(frame["label"]) == labels
    assert r.cluster.lan.bytes > frame["bytes"].sum()   # real message sizes on the wire
    assert frame["bytes"].min() > 1000                  # today: the whole exported state


@pytest.mark.parametrize(("label", "phase", "nth"), [
    ("client_hello", "committed", 0),   # mirror has pre-ServerHello state, client has nothing
    ("client_hello", "released", 0),    # ServerHello flight already on the wire
    ("client_key_exchange", "committed", 0),
    ("change_cipher_spec", "released", 0),
    ("finished", "committed", 0),       # client Finished read, server CCS/Finished not sent
    ("finished", "released", 0),
    ("established", "committed", 0),
    ("data", "committed", 0),           # request relayed to the origin, not yet acknowledged
    ("response", "committed", 2),       # mid-response, third piece clustered but not sent
    ("response", "released", 2),        # mid-response, third piece on the wire
])
def test_owner_killed_the_mirror_finishes_byte_identically(label: str, phase: str,
                                                             nth: int) -> None:
    r = run(kill_owner(label, phase, nth))
    assert_served(r)
    (when, node, how), = r.conn.takeovers
    assert how.endswith(f"({label})")
    first_owner = r.conn.checkpoints[0][3]
    assert node != first_owner and not r.cluster.node(first_owner).alive
    assert [d[1] for d in r.cluster.deaths] == [first_owner]


@pytest.mark.parametrize("label", ["client_key_exchange", "finished", "response"])
def test_client_writing_whole_flights_is_served_too(label: str) -> None:
    r = run(kill_owner(label, "committed", 1 if label == "response" else 0), per_record=False)
    assert_served(r)
    assert len(r.conn.takeovers) == 1


def test_owner_killed_before_the_first_commit_fingered_ack_restarts_cleanly() -> None:
    r = run(kill_owner("client_hello", "prepared"))
    assert_served(r)
    assert [t[2] for t in r.conn.takeovers] == ["fingered ACK"]


def test_mirror_that_dies_under_a_pending_commit_is_replaced_without_deadlock() -> None:
    def kill_mirror(cluster: Cluster, conn: RelayConn, cp: Checkpoint, phase: str) -> None:
        mirror = cluster.mirror[conn.bucket]
        if cp.label == "finished" and phase == "prepared" and mirror is not None:
            cluster.node(mirror).kill()

    r = run(kill_mirror)
    assert_served(r)
    assert r.conn.takeovers == [] and len(r.cluster.deaths) == 1


def test_two_successive_owner_failures() -> None:
    first, second = kill_owner("client_hello", "committed"), kill_owner("response", "released", 1)

    def both(cluster: Cluster, conn: RelayConn, cp: Checkpoint, phase: str) -> None:
        first(cluster, conn, cp, phase)
        second(cluster, conn, cp, phase)

    r = run(both)
    assert_served(r)
    assert len(r.conn.takeovers) == 2 and len(r.cluster.deaths) == 2


@pytest.mark.parametrize("label", ["client_hello", "client_key_exchange", "finished"])
def test_negative_control_commit_before_cluster_makes_the_client_fail(label: str) -> None:
    """Figure 6: the owner commits (ACKs the client's flight) and dies before the update
    reaches the mirror; the mirror's state is older than what the client was told, the client
    never gets the answer to its acknowledged flight and gives up (the paper: a dangling
    connection)."""
    r = run(kill_owner(label, "released"), ClusterParams(cluster_then_commit=False))
    assert r.client.error is not None
    assert r.client.done_at is None
    assert bytes(r.client.response) != r.origin.response


def _mirror_then_owner(cluster: Cluster, conn: RelayConn, cp: Checkpoint, phase: str) -> None:
    """Kill the mirror before the first update reaches it, then the owner mid-response."""
    if cp.label == "client_hello" and phase == "prepared":
        mirror = cluster.mirror[conn.bucket]
        assert mirror is not None
        cluster.node(mirror).kill()
    dead = sum(not n.alive for n in cluster.nodes)
    if cp.label == "response" and phase == "released" and dead == 1:
        cluster.node(conn.handler).kill()


def test_mirror_then_owner_failure_the_third_node_finishes() -> None:
    r = run(_mirror_then_owner)
    assert_served(r)
    assert len(r.cluster.deaths) == 2 and len(r.conn.takeovers) == 1


def test_negative_control_unclustered_state_is_unknown_and_reset_after_2msl() -> None:
    """Without cluster-then-commit the first mirror's death loses every update: the last node
    has no state, the client's ACK no longer carries the finger, so the connection is
    unknown; the node stays silent for 2MSL (section 4.6) and then resets it."""
    params = ClusterParams(cluster_then_commit=False)
    r = run(_mirror_then_owner, params, until=200.0, timeout=None)
    (when, node, how), = r.conn.takeovers
    assert how == "unknown connection"
    assert r.client.error == "connection reset"
    (reset_at, conn_id), = r.relay.resets
    assert reset_at >= when + 2 * params.msl
    assert r.relay.guards[node].suppressed >= 1
    assert r.origin.requests and bytes(r.client.response) != r.origin.response
