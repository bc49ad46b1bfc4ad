"""Resumption on another node after the first node died: the replicated session store."""

from __future__ import annotations

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
from sslacc_sim.sessions import decode_session, encode_session
from tls12 import ClientConfig
from tls12.session import Session
from tls12.testing import seeded_rng

from .helpers import CLIENT, SUITES, VIP, server_configs

BODY = bytes(range(256)) * 40


def two_connections(params: ClusterParams, kill_second_at: tuple[str, str] | None = None,
                    ) -> tuple[Relay, list[TlsClient], list[int]]:
    """A full handshake, its node killed, then a second connection offering the session;
    ``kill_second_at`` (label, phase): also kill the second connection's owner there."""
    env = simpy.Environment()
    cluster = Cluster(env, 3, params)
    origin = Origin(BODY)

    relay = Relay(env, cluster, origin, server_configs(lambda: relay))
    if kill_second_at is not None:
        def hook(conn: RelayConn, cp: Checkpoint, phase: str) -> None:
            if conn.id == 1 and (cp.label, phase) == kill_second_at and not conn.takeovers:
                cluster.node(conn.handler).kill()

        relay.hook = hook
    wire = Duplex(env, LinkParams(10e6, 0.005))
    clients, handlers = [], []
    session: Session | None = None
    for port in (40000, 40001):
        conn = relay.connect(FourTuple(CLIENT, port, VIP, 443),
                             (wire.ab,), (wire.ba,))
        config = ClientConfig(rng=seeded_rng(f"client{port}"), cipher_suites=SUITES,
                              session=session)
        clients.append(TlsClient(env, conn.tcp, config, timeout=10.0))
        handlers.append(conn.handler)
        env.run(until=env.now + 10.0)
        session = clients[0].tls.session
        if port == 40000:
            cluster.node(conn.handler).kill()
            env.run(until=env.now + 1.0)      # the master reassigns its buckets
    return relay, clients, handlers


def test_a_session_made_on_a_dead_node_resumes_on_another() -> None:
    relay, (first, second), (node_a, node_b) = two_connections(ClusterParams())
    for client in (first, second):
        assert client.error is None and bytes(client.response).endswith(BODY)
    assert node_b != node_a
    assert not first.tls.resumed and second.tls.resumed
    labels = [c[1] for c in relay.conns[1].checkpoints]
    assert "client_key_exchange" not in labels          # no RSA operation: abbreviated
    assert relay.session_stores[node_a].sent >= 1


def test_control_without_replication_the_client_falls_back_to_a_full_handshake() -> None:
    relay, (first, second), (node_a, node_b) = two_connections(
        ClusterParams(replicate_sessions=False))
    assert second.error is None and bytes(second.response).endswith(BODY)
    assert node_b != node_a and not second.tls.resumed
    assert "client_key_exchange" in [c[1] for c in relay.conns[1].checkpoints]


def test_session_wire_form_round_trips_and_refuses_delegate_handles() -> None:
    s = Session(b"\x01" * 32, b"\x02" * 48, 0x002F, True, "example.org")
    assert decode_session(encode_session(s)) == s
    with pytest.raises(ValueError, match="handle"):
        encode_session(Session(b"\x01" * 32, b"", 0x002F, True, handle=object()))


@pytest.mark.parametrize("point", [
    ("client_hello", "committed"),        # resumed: ServerHello, CCS, Finished not yet sent
    ("client_hello", "released"),         # the server's Finished is on the wire (Figure 21)
    ("change_cipher_spec", "released"),
    ("finished", "committed"),            # the client's Finished read, not acknowledged
])
def test_failure_during_a_resumed_handshake(point: tuple[str, str]) -> None:
    relay, (_, second), (node_a, node_b) = two_connections(ClusterParams(), point)
    assert second.error is None and bytes(second.response).endswith(BODY)
    assert second.tls.resumed
    (when, node, how), = relay.conns[1].takeovers
    assert how.endswith(f"({point[0]})") and node not in (node_a, node_b)


def test_each_replica_costs_its_receiver_one_interrupt_and_a_parse() -> None:
    env = simpy.Environment()
    params = ClusterParams(interrupt_cpu=1e-3, msg_cpu=2e-3, msg_cpu_per_byte=0.0)
    cluster = Cluster(env, 3, params)
    relay = Relay(env, cluster, Origin(b""), server_configs())
    busy: list[tuple[int, float]] = []

    def watch(node: int):  # type: ignore[no-untyped-def]
        yield env.timeout(0.0005)                 # the replica has arrived (LAN delay 50 us)
        with cluster.node(node).cpu.request() as req:
            yield req
            busy.append((node, env.now))

    for n in (1, 2):
        env.process(watch(n))
    relay.session_store(0).put(Session(b"\x01" * 32, b"\x02" * 48, 0x002F, True))
    env.run(until=0.1)
    assert [n.interrupts for n in cluster.nodes] == [0, 1, 1]
    assert all(relay.session_store(n).get(b"\x01" * 32) is not None for n in (1, 2))
    # each receiver's CPU was held for interrupt + parse (3 ms) from the arrival on
    assert [n for n, _ in busy] == [1, 2] and all(t > 0.003 for _, t in busy)
