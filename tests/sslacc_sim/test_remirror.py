"""A mirror dies: its owner re-sends the new mirror the state of every connection, idle ones too.

Four nodes; the clients' connections belong to node 1, mirrored by node 2.  Node 2 dies while
the connections are idle (their clients are 50 ms away, so between two updates a connection
waits some 100 ms for the client); the master names node 3 the new mirror.  A connection
with no update under way sends node 3 nothing of its own until its next update, so without
:mod:`sslacc_sim.handoff`'s re-send node 3 holds nothing of it, and when node 1 dies a few
milliseconds later node 3 takes over connections it does not know (the control,
``mirror_resend=False``).  With the re-send the owner sends node 3 every connection's newest
checkpoint as soon as it hears of the change, and node 3 takes them over from it.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
import simpy

from netsim.link import Duplex, LinkParams
from sslacc_sim import (
    BucketChange,
    Checkpoint,
    Cluster,
    ClusterParams,
    FourTuple,
    Node,
    Origin,
    Relay,
    RelayConn,
    TlsClient,
)
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
    run,
    server_configs,
)

#: Keepalives every 10 ms: a death is found within 30-35 ms.
FAST = ClusterParams(keepalive_interval=0.01)
OWNER, MIRROR, NEW_MIRROR, NODES = 1, 2, 3, 4
#: Moments the connections are idle (see the module docstring), and what they last sent:
#: after the ClientHello (a full state, the client's next flight 100 ms away) or after a
#: response piece (a compact state, whose keys must ride along; the next piece 100 ms away).
IDLE = {"handshake": (0.155, "client_hello"), "response": (0.545, "response")}


@dataclasses.dataclass
class Remirrored:
    cluster: Cluster
    relay: Relay
    origin: Origin
    clients: list[TlsClient]
    conns: list[RelayConn]
    #: when the owner heard the change that named ``watch_mirror`` a mirror (after the death)
    heard: list[float]
    #: (time, conn, committed number, number the bucket's mirror holds) when it held less
    lapses: list[tuple[float, int, int, int]]


def run_remirror(params: ClusterParams = FAST, mirror_dies_at: float = 0.155,
                 kill_after: float | None = 0.005, watch_mirror: int = NEW_MIRROR,
                 mute: int | None = None, n: int = 4, delay: float = 0.05,
                 until: float = 30.0) -> Remirrored:
    """``n`` clients of node 1 (mirror node 2) over ``delay``-second wires; node 2 dies at
    ``mirror_dies_at``; ``kill_after`` seconds after the owner hears the first change that
    names ``watch_mirror`` the mirror of a connection's bucket, the owner dies.  Node ``mute``
    drops every update it receives.  A watcher checks every 0.1 ms, while the owner lives,
    that each bucket's mirror holds every open connection's committed checkpoint (``lapses``
    lists each time it did not)."""
    env = simpy.Environment()
    cluster = Cluster(env, NODES, params)
    origin = Origin(BODY)
    relay = Relay(env, cluster, origin, server_configs())
    clients, conns, port = [], [], 40000
    for i in range(n):
        port = client_port(NODES, OWNER, first=port + 1)
        wire = Duplex(env, LinkParams(10e6, delay))
        conn = relay.connect(FourTuple(CLIENT, port, VIP, 443), (wire.ab,), (wire.ba,))
        config = ClientConfig(rng=seeded_rng(f"client{i}"), cipher_suites=SUITES)
        clients.append(TlsClient(env, conn.tcp, config, timeout=20.0))
        conns.append(conn)
    buckets = {c.bucket for c in conns}
    heard: list[float] = []
    committed: dict[int, int] = {}
    lapses: list[tuple[float, int, int, int]] = []

    def on_commit(conn: RelayConn, cp: Checkpoint, phase: str) -> None:
        if phase == "committed":
            committed[conn.id] = cp.number

    def on_change(change: BucketChange) -> None:
        if heard or change.bucket not in buckets or change.mirror != watch_mirror:
            return
        heard.append(env.now)
        if kill_after is not None:
            env.timeout(kill_after).callbacks.append(lambda _: cluster.node(OWNER).kill())

    def watch() -> simpy.events.ProcessGenerator:
        while cluster.node(OWNER).alive:
            for conn in conns:
                mirror = cluster.mirror[conn.bucket]
                if conn.closed or conn.id not in committed or mirror is None:
                    continue
                held = conn.mirrored.get(mirror)
                number = -1 if held is None else held.number
                if number < committed[conn.id]:
                    lapses.append((env.now, conn.id, committed[conn.id], number))
            yield env.timeout(1e-4)

    relay.hook = on_commit
    cluster.subscribe(on_change)
    if mute is not None:
        cluster.node(mute).mute_updates()
    env.timeout(mirror_dies_at).callbacks.append(lambda _: cluster.node(MIRROR).kill())
    env.process(watch())
    env.run(until=until)
    return Remirrored(cluster, relay, origin, clients, conns, heard, lapses)


def assert_all_served(r: Remirrored) -> None:
    """Every client got a byte-identical response; the origin saw each request once."""
    for client, conn in zip(r.clients, r.conns, strict=True):
        assert client.error is None, (conn.id, client.error, conn.takeovers)
        assert bytes(client.response) == r.origin.response
    assert sorted(c for c, _ in r.origin.requests) == [c.id for c in r.conns]


def last_by(conn: RelayConn, node: int) -> tuple[int, str]:
    """(number, label) of the newest checkpoint ``node`` captured for ``conn``."""
    number = max(i for i, c in enumerate(conn.checkpoints) if c[3] == node)
    return number, str(conn.checkpoints[number][1])


def sent_between(r: Remirrored, src: int, dst: int, start: float, end: float) -> list[int]:
    """Connections of the update messages ``src`` sent ``dst`` in [start, end), sorted."""
    rows = r.relay.updates.frame()
    rows = rows[(rows["kind"] == "update") & (rows["src"] == src) & (rows["dst"] == dst)
                & (rows["time"] >= start) & (rows["time"] < end)]
    return sorted(c for conns in rows["conns"] for c in conns)


def test_the_masters_change_names_the_mirror_it_replaced() -> None:
    """The broadcast row of a bucket whose mirror died says which mirror it replaced; the
    rows of the dead node's own buckets too (their owner changed as well)."""
    env = simpy.Environment()
    cluster = Cluster(env, NODES, FAST)
    heard: list[BucketChange] = []
    cluster.subscribe(heard.append)
    env.timeout(0.1).callbacks.append(lambda _: cluster.node(MIRROR).kill())
    env.run(until=0.5)
    remirrored = {(c.old_owner, c.owner, c.old_mirror, c.mirror) for c in heard
                  if c.old_owner == c.owner}
    assert remirrored == {(OWNER, OWNER, MIRROR, NEW_MIRROR)}
    taken = {(c.old_owner, c.owner, c.old_mirror, c.mirror) for c in heard
             if c.old_owner != c.owner}
    assert taken == {(MIRROR, NEW_MIRROR, NEW_MIRROR, 0)}


@pytest.mark.parametrize(("when", "aggregate"),
                         [("handshake", False), ("response", False), ("response", True)])
def test_idle_connections_survive_their_mirrors_death_then_their_owners(
        when: str, aggregate: bool) -> None:
    """Node 2 dies while every connection is idle; 5 ms after the owner hears that node 3
    mirrors the bucket, the owner dies too.  The owner had re-sent node 3 each connection's
    newest checkpoint (one full update each, acknowledged; with ``aggregate`` in one batch),
    so node 3 takes every connection over from the very checkpoint node 1 last captured,
    and every client is served."""
    dies_at, label = IDLE[when]
    r = run_remirror(dataclasses.replace(FAST, aggregate=aggregate), mirror_dies_at=dies_at)
    assert_all_served(r)
    (heard,) = r.heard
    for conn in r.conns:
        number, last = last_by(conn, OWNER)
        assert last == label
        (_, node, how), = conn.takeovers
        assert (node, how) == (NEW_MIRROR, f"checkpoint {number} ({label})")
    ids = [c.id for c in r.conns]
    assert sent_between(r, OWNER, NEW_MIRROR, heard, heard + 0.005) == ids
    # the gap: from the master's change until the re-sent state arrives, about a millisecond
    change = min(c.time for c in r.cluster.changes if c.mirror == NEW_MIRROR)
    assert {c for _, c, _, _ in r.lapses} == set(ids)
    assert all(change <= t < change + 2e-3 for t, _, _, _ in r.lapses)
    assert r.relay.resending == {} and r.relay.frozen == {}


@pytest.mark.parametrize("when", sorted(IDLE))
def test_control_without_the_resend_the_owners_death_loses_the_idle_connections(
        when: str) -> None:
    """``mirror_resend`` off (the behaviour before): node 3 holds nothing of an idle
    connection until its next update, which comes after the owner's death; node 3 takes
    every connection over without knowing it, and it is reset after 2MSL (the clients time
    out first)."""
    dies_at, _ = IDLE[when]
    r = run_remirror(dataclasses.replace(FAST, mirror_resend=False), mirror_dies_at=dies_at)
    assert [client.error for client in r.clients] == ["timed out"] * len(r.conns)
    assert [c.takeovers[0][1:] for c in r.conns] == [(NEW_MIRROR, "unknown connection")] * 4
    (heard,) = r.heard
    assert sent_between(r, OWNER, NEW_MIRROR, 0, heard + 0.005) == []
    assert {c for _, c, _, held in r.lapses if held == -1} == {c.id for c in r.conns}
    assert max(t for t, _, _, _ in r.lapses) >= heard + 0.005 - 1e-4   # until the death


def test_a_silent_new_mirror_is_reported_and_the_next_one_gets_the_states() -> None:
    """Node 3, the new mirror, drops every update: the re-sent states are not acknowledged
    within ``update_timeout`` (40 ms, longer than the 30 ms detection time, shorter than the
    connections' idle time), so the owner reports node 3 unfit; the master names node 0,
    the owner re-sends there (a change that replaced an *unfit* mirror), and node 0 takes
    every connection over when the owner dies 5 ms after hearing of it."""
    params = dataclasses.replace(FAST, update_timeout=0.04)
    r = run_remirror(params, watch_mirror=0, mute=NEW_MIRROR)
    assert_all_served(r)
    (when, node, by), = r.cluster.mirror_faults
    assert (node, by) == (NEW_MIRROR, OWNER) and r.cluster.unfit == {NEW_MIRROR}
    assert r.relay.mirror_faults == []               # no update of a connection timed out
    for conn in r.conns:
        number, label = last_by(conn, OWNER)
        (_, node, how), = conn.takeovers
        assert (node, how) == (0, f"checkpoint {number} ({label})")
    (heard,) = r.heard
    assert sent_between(r, OWNER, 0, heard, heard + 0.005) == [c.id for c in r.conns]
    assert r.relay.resending == {}


@pytest.mark.parametrize("dies_at", [0.06, 0.075, 0.09, 0.105])
def test_busy_connections_get_their_state_to_the_new_mirror_once(dies_at: float) -> None:
    """Clients 5 ms away, node 2 dies mid-response and nobody else: most connections have
    an update pending at node 2 (it goes to node 3 when the master replaces node 2), the
    others are between two updates (their newest state is re-sent).  Everyone is served;
    within 2 ms of the master's change node 3 holds every connection's committed checkpoint
    and never lacks one again; and no connection's state is sent to node 3 twice then (one
    whose pending update goes there is not re-sent as well)."""
    r = run_remirror(mirror_dies_at=dies_at, kill_after=None, delay=0.005, n=6, until=5.0)
    assert_all_served(r)
    (heard,) = r.heard
    change = min(c.time for c in r.cluster.changes if c.mirror == NEW_MIRROR)
    assert r.lapses and all(change <= t < change + 2e-3 for t, _, _, _ in r.lapses)
    resent = sent_between(r, OWNER, NEW_MIRROR, heard, heard + 1e-4)
    assert len(resent) == len(set(resent)) and set(resent) <= {c.id for c in r.conns}
    assert all(conn.takeovers == [] for conn in r.conns)
    assert r.relay.resending == {} and r.relay.frozen == {}


def _replace_mirror_at(label: str, done: list[tuple[float, int]]) -> Kill:
    """At the ``label`` update (prepared: captured, still being built) the mirror dies and
    the master replaces it at once, so the change arrives while the update is built; the
    (time, mirror) goes to ``done``."""

    def kill(cluster: Cluster, conn: RelayConn, cp: Checkpoint, phase: str) -> None:
        mirror = cluster.mirror[conn.bucket]
        if cp.label == label and phase == "prepared" and not done and mirror is not None:
            done.append((cluster.env.now, mirror))
            cluster.node(mirror).kill()
            cluster._remove(mirror)

    return kill


@pytest.mark.parametrize("label", ["client_key_exchange", "change_cipher_spec", "finished"])
def test_an_update_built_while_its_mirror_is_replaced_goes_to_the_new_mirror(
        label: str) -> None:
    """A handshake update (a delta: its build takes longer than the broadcast's LAN delay)
    is being built when the owner hears that its mirror was replaced.  It was addressed to
    the dead mirror; it goes to the new one, which acknowledges it: the connection goes on
    (sent to the dead node it would wait for an acknowledgement for ever)."""
    done: list[tuple[float, int]] = []
    r = run(_replace_mirror_at(label, done), FAST, until=5.0)
    assert_served(r)
    (killed, dead), = done
    new = r.cluster.mirror[r.conn.bucket]
    assert new is not None and new != dead and r.conn.takeovers == []
    rows = r.relay.updates.frame()
    late = rows[(rows["kind"] == "update") & (rows["time"] >= killed)]
    assert set(late["dst"]) == {new}             # nothing was sent to the dead mirror
    assert r.relay.mirror_faults == []
    assert r.conn.mirrored[new].number == len(r.conn.checkpoints) - 1


@pytest.mark.parametrize("label", ["client_key_exchange", "response"])
def test_a_transfer_is_whole_and_carries_the_keys_even_to_a_node_that_has_a_base(
        label: str) -> None:
    """The transfer helper both the join's handoff and the re-send use
    (``Handoff._send_state``), called on the bucket's own mirror right after an update
    committed there: the mirror holds that state, and the owner holds a delta base for it
    (mid-handshake) or knows it has the keys (compact).  The transfer is still the whole
    state (no delta) and still carries the keys, the mirror acknowledges it and holds the
    same checkpoint, and the connection goes on."""
    sent: list[Checkpoint] = []
    acked: list[tuple[simpy.Event, Checkpoint]] = []

    def setup(cluster: Cluster, relay: Relay) -> None:
        send = relay.updates.send

        def record(src: Node, dst: int, conn: int, msg: bytes, *args: Any) -> None:
            sent.append(Checkpoint.decode(msg))
            send(src, dst, conn, msg, *args)

        def hook(conn: RelayConn, cp: Checkpoint, phase: str) -> None:
            if cp.label == label and phase == "committed" and not acked:
                mirror = cluster.mirror[conn.bucket]
                assert mirror is not None
                assert mirror in conn.sent_full or mirror in conn.keys_at
                del sent[:]
                ack = relay._send_state(conn, cluster.node(conn.handler), mirror)
                acked.append((ack, cp))

        relay.updates.send = record              # type: ignore[method-assign]
        relay.hook = hook

    r = run(None, FAST, until=5.0, setup=setup)
    assert_served(r)
    (ack, cp), = acked
    assert ack.triggered
    keys = r.conn.keys if cp.compact else b""
    assert keys is not None and sent[0] == dataclasses.replace(cp, keys=keys)
    assert sent[0].compact == (label == "response") and sent[0].base == -1
