"""The update channel: batch codec, aggregation (Figure 28 "agg"), a mirror that goes silent."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable

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
from sslacc_sim.updates import decode_batch, encode_batch
from tls12 import ClientConfig
from tls12.testing import seeded_rng

from .helpers import (
    BODY,
    CLIENT,
    SUITES,
    VIP,
    Kill,
    assert_served,
    client_port,
    kill_owner,
    run,
    server_configs,
)

# -- the batch codec ----------------------------------------------------------------------


def test_batch_round_trips_byte_exact() -> None:
    messages = [b"", b"x", bytes(range(256)) * 20, b"\n{json}\n"]
    wire = encode_batch(messages)
    assert decode_batch(wire) == messages
    assert len(wire) == 2 + sum(4 + len(m) for m in messages)


@pytest.mark.parametrize(("wire", "why"), [
    (b"\x00", "shorter"), (b"\x00\x00", "empty"), (b"\x00\x01\x00\x00", "length"),
    (b"\x00\x01\x00\x00\x00\x05abc", "update"), (encode_batch([b"a"]) + b"z", "trailing"),
])
def test_batch_decoder_rejects_malformed_messages(wire: bytes, why: str) -> None:
    with pytest.raises(ValueError, match=why):
        decode_batch(wire)


def test_batch_encoder_refuses_an_empty_batch() -> None:
    with pytest.raises(ValueError, match="1 to 65535"):
        encode_batch([])


# -- aggregation --------------------------------------------------------------------------

@dataclasses.dataclass
class Many:
    cluster: Cluster
    relay: Relay
    origin: Origin
    clients: list[TlsClient]
    conns: list[RelayConn]


def run_many(n: int, params: ClusterParams, kill: Kill | None = None,
             until: float = 30.0) -> Many:
    """``n`` clients starting together, every connection owned by node 0 (mirror node 1)."""
    env = simpy.Environment()
    cluster = Cluster(env, 3, params)
    origin = Origin(BODY)
    relay = Relay(env, cluster, origin, server_configs())
    clients, conns, port = [], [], 40000
    for i in range(n):
        port = client_port(3, 0, first=port + 1)
        wire = Duplex(env, LinkParams(10e6, 0.005))
        conn = relay.connect(FourTuple(CLIENT, port, VIP, 443), (wire.ab,), (wire.ba,))
        config = ClientConfig(rng=seeded_rng(f"client{i}"), cipher_suites=SUITES)
        clients.append(TlsClient(env, conn.tcp, config, timeout=20.0))
        conns.append(conn)
    if kill is not None:
        relay.hook = lambda c, cp, phase: kill(cluster, c, cp, phase)
    env.run(until=until)
    return Many(cluster, relay, origin, clients, conns)


def assert_all_served(m: Many) -> None:
    for client, conn in zip(m.clients, m.conns, strict=True):
        assert client.error is None, (conn.id, client.error)
        assert bytes(client.response) == m.origin.response
    assert sorted(c for c, _ in m.origin.requests) == [c.id for c in m.conns]   # once each
    assert m.relay.mirror_faults == []      # no false alarm from the update timeout


def test_aggregation_cuts_messages_and_interrupts_not_updates() -> None:
    norm = run_many(6, ClusterParams())
    agg = run_many(6, ClusterParams(aggregate=True))
    assert_all_served(norm)
    assert_all_served(agg)
    f_norm, f_agg = norm.relay.updates.frame(), agg.relay.updates.frame()
    # the same updates (each connection clusters every step), in fewer messages
    assert f_agg["updates"].sum() == f_norm["updates"].sum()
    assert (f_norm["updates"] == 1).all() and f_agg["updates"].max() > 1
    assert len(f_agg) < len(f_norm)
    interrupts = [sum(n.interrupts for n in r.cluster.nodes) for r in (norm, agg)]
    assert interrupts[1] < interrupts[0]
    # every message received raised one interrupt: updates at node 1, acks at node 0
    assert interrupts[0] == len(f_norm)
    per_conn = [r.relay.cluster_bytes_frame() for r in (norm, agg)]
    assert (per_conn[1]["updates"] == per_conn[0]["updates"]).all()
    assert per_conn[1]["messages"].mean() < per_conn[0]["messages"].mean()
    assert per_conn[0]["messages"].sum() == pytest.approx(len(f_norm))
    assert per_conn[1]["wire_bytes"].sum() == pytest.approx(f_agg["bytes"].sum())


def test_with_aggregation_each_connection_commits_only_its_own_acknowledged_update() -> None:
    """Cluster-then-commit under batching: at "committed" the mirror already holds this very
    update of this connection (not only some earlier one of the batch)."""
    seen: list[tuple[int, int, int]] = []

    def check(cluster: Cluster, conn: RelayConn, cp: Checkpoint, phase: str) -> None:
        if phase == "committed":
            mirror = cluster.mirror[conn.bucket]
            assert mirror is not None
            seen.append((conn.id, cp.number, conn.mirrored[mirror].number))

    m = run_many(4, ClusterParams(aggregate=True), check)
    assert_all_served(m)
    assert seen and all(sent == held for _, sent, held in seen)


AGG = ClusterParams(aggregate=True)


@pytest.mark.parametrize(("label", "phase", "nth"), [
    ("client_hello", "sent", 0),        # in an open batch, not yet on the wire
    ("client_key_exchange", "committed", 0),
    ("finished", "released", 0),
    ("data", "sent", 0),
    ("response", "sent", 2),
    ("response", "committed", 2),
    ("alert_received", "committed", 0),
])
def test_campaign_with_aggregation_still_passes(label: str, phase: str, nth: int) -> None:
    r = run(kill_owner(label, phase, nth), AGG)
    assert_served(r)
    assert len(r.conn.takeovers) == 1


def test_aggregated_batch_with_the_owner_killed_every_connection_survives() -> None:
    kill = kill_owner("response", "sent", 1)
    m = run_many(4, AGG, lambda cl, c, cp, ph: kill(cl, c, cp, ph) if c.id == 2 else None)
    assert_all_served(m)
    assert {len(c.takeovers) for c in m.conns} == {1}      # the whole node's buckets moved


# -- a mirror that stops acknowledging updates ---------------------------------------------

def mute_mirror(label: str) -> Kill:
    """At the first ``label`` update (prepared), the mirror goes silent for updates."""

    def mute(cluster: Cluster, conn: RelayConn, cp: Checkpoint, phase: str) -> None:
        mirror = cluster.mirror[conn.bucket]
        if cp.label == label and phase == "prepared" and mirror is not None \
                and not cluster.unfit:
            cluster.node(mirror).mute_updates()

    return mute


@pytest.mark.parametrize("label", ["client_key_exchange", "response"])
def test_silent_mirror_is_detected_reported_and_replaced(label: str) -> None:
    p = ClusterParams()
    r = run(mute_mirror(label), p)
    assert_served(r)
    owner = r.conn.checkpoints[0][3]
    (fault,) = r.relay.mirror_faults
    assert fault.label == label and fault.owner == owner
    assert fault.waited == pytest.approx(p.update_timeout)
    silent = fault.mirror
    assert r.cluster.node(silent).alive and r.cluster.deaths == []      # not dead
    assert r.cluster.unfit == {silent}
    (when, node, by), = r.cluster.mirror_faults
    assert node == silent and by == owner and when >= fault.time
    new = r.cluster.mirror[r.conn.bucket]
    assert new not in (None, silent, owner)
    assert r.conn.mirrored[new].label == r.conn.checkpoints[-1][1]       # it holds the state
    assert list(r.relay.mirror_faults_frame()["mirror"]) == [silent]
    assert r.conn.takeovers == []


def test_replacement_mirror_takes_over_when_the_owner_then_dies() -> None:
    mute, kill = mute_mirror("client_hello"), kill_owner("response", "released", 2)

    def both(cluster: Cluster, conn: RelayConn, cp: Checkpoint, phase: str) -> None:
        mute(cluster, conn, cp, phase)
        kill(cluster, conn, cp, phase)

    r = run(both)
    assert_served(r)
    (fault,) = r.relay.mirror_faults
    (when, node, how), = r.conn.takeovers
    assert node not in (fault.mirror, fault.owner) and how.endswith("(response)")


def test_silent_mirror_in_a_two_node_cluster_the_owner_goes_on_unmirrored() -> None:
    r = run(mute_mirror("finished"), nodes=2)
    assert_served(r)
    assert len(r.relay.mirror_faults) == 1
    assert r.cluster.mirror[r.conn.bucket] is None


def test_control_without_an_update_timeout_a_silent_mirror_deadlocks_the_connection() -> None:
    r = run(mute_mirror("finished"), ClusterParams(update_timeout=math.inf))
    assert r.client.error == "timed out"
    assert r.relay.mirror_faults == [] and r.cluster.unfit == set()
    assert r.origin.requests == []          # stuck before the request could be read


# -- a report of a silent mirror that is lost ----------------------------------------------

def lose_first_report(how: str) -> Callable[[Cluster, Relay], None]:
    """``setup`` for :func:`run`: the first unfit-mirror report is lost, either on the wire
    (``"dropped"``) or with the master it went to, killed before it could act (``"master"``)."""

    def setup(cluster: Cluster, relay: Relay) -> None:
        report, lost = cluster.report_unfit_mirror, []

        def lossy(mirror: int, reporter: int) -> None:
            if lost:
                report(mirror, reporter)
                return
            lost.append(cluster.master().id)
            if how == "master":
                report(mirror, reporter)         # in flight when its addressee dies
                cluster.master().kill()
                return
            send = cluster.lan.send
            cluster.lan.send = lambda *args, **kw: None      # type: ignore[method-assign]
            try:
                report(mirror, reporter)
            finally:
                cluster.lan.send = send              # type: ignore[method-assign]

        cluster.report_unfit_mirror = lossy      # type: ignore[method-assign]

    return setup


@pytest.mark.parametrize("how", ["dropped", "master"])
def test_a_lost_report_of_a_silent_mirror_is_sent_again(how: str) -> None:
    """Owner 2 (not the master), mirror 3 goes silent mid-response; its report to the
    master (node 0) is lost.  The owner sends it again every ``report_interval`` until the
    table shows the mirror replaced: the pending update reaches the new mirror, the client
    gets its whole response."""
    p = ClusterParams()
    r = run(mute_mirror("response"), p, nodes=4, port=client_port(4, owner=2),
            setup=lose_first_report(how))
    assert_served(r)
    (fault,) = r.relay.mirror_faults              # the owner noticed once ...
    assert (fault.owner, fault.mirror) == (2, 3)
    (when, node, by), = r.cluster.mirror_faults   # ... and the master acted once
    assert (node, by) == (3, 2) and r.cluster.unfit == {3}
    new = r.cluster.mirror[r.conn.bucket]
    assert r.conn.mirrored[new].label == r.conn.checkpoints[-1][1]   # it holds the state
    assert r.conn.takeovers == []
    if how == "dropped":                          # the same master, one interval later
        assert r.cluster.deaths == [] and new == 0
        assert when - fault.time == pytest.approx(p.report_interval, abs=1e-3)
    else:                                         # the next master, once it is master
        assert [(dead, by) for _, dead, by in r.cluster.deaths] == [(0, 1)]
        assert new == 1
        died = r.cluster.deaths[0][0]
        assert died < when <= died + p.report_interval + 1e-3


@pytest.mark.parametrize("how", ["dropped", "master"])
def test_control_a_lost_report_not_sent_again_leaves_the_connection_waiting(how: str) -> None:
    """``report_interval=math.inf`` (the behaviour before): the lost report is never sent
    again, nobody replaces the silent mirror, and the owner waits for its acknowledgement
    until the client gives up -- safe (nothing committed unmirrored) but never live."""
    r = run(mute_mirror("response"), ClusterParams(report_interval=math.inf), nodes=4,
            port=client_port(4, owner=2), setup=lose_first_report(how))
    assert r.client.error == "timed out"
    assert len(r.relay.mirror_faults) == 1 and r.cluster.mirror_faults == []
    assert r.cluster.unfit == set() and r.cluster.mirror[r.conn.bucket] == 3
    assert r.conn.checkpoints[-1][1] == "response" and r.conn.pending is not None
