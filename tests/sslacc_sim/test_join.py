"""A node that joins gets the state of a busy bucket before it becomes its mirror.

A join re-forms the ring: the newcomer (node 3 after nodes 0-2) becomes the mirror of the
buckets of node 2, whose connections it knows nothing of.  :mod:`sslacc_sim.handoff`: the
master keeps the old mirror (node 0) until the owner has sent node 3 the full state of each
connection.  Most clients here are far away (50 ms each way), so a connection is idle for
tens of milliseconds between two updates: without the handoff node 3 holds nothing of it in
that time, and the owner's death then loses it (the control).  The clients 5 ms away keep
updates under way while the bucket is handed over.
"""

from __future__ import annotations

import dataclasses
from typing import Any

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
    assert_served,
    client_port,
    kill_owner,
    run,
    server_configs,
)

#: Keepalives every 10 ms: a join is admitted, a death found, within tens of milliseconds.
FAST = ClusterParams(keepalive_interval=0.01)
OWNER, OLD_MIRROR, NEWCOMER = 2, 0, 3


@dataclasses.dataclass
class Joined:
    cluster: Cluster
    relay: Relay
    origin: Origin
    clients: list[TlsClient]
    conns: list[RelayConn]
    #: when the owner heard the master's first change after the join
    heard: list[float]
    #: (time, conn, committed number, number the bucket's mirror holds) when it held less
    lapses: list[tuple[float, int, int, int]]


def run_join(params: ClusterParams = FAST, kill_after: float | None = None,
             join_at: float = 0.3, n: int = 4, delay: float = 0.05,
             mute_newcomer: bool = False, mute_old_at: float | None = None,
             nodes: int = 3, owner: int = OWNER, until: float = 30.0) -> Joined:
    """``n`` clients of node ``owner`` (2 of 0-2, mirror node 0) over ``delay``-second wires;
    a node joins at ``join_at`` (dropping every update with ``mute_newcomer``; node 0 starts
    dropping them at ``mute_old_at``); ``kill_after`` seconds after the first table change
    that follows, the owner dies.  A watcher checks every 0.1 ms, while the owner lives,
    that each bucket's mirror holds every open connection's committed checkpoint (``lapses``
    lists each time it did not)."""
    env = simpy.Environment()
    cluster = Cluster(env, nodes, params)
    origin = Origin(BODY)
    relay = Relay(env, cluster, origin, server_configs())
    clients, conns, port = [], [], 40000
    for i in range(n):
        port = client_port(nodes, owner, first=port + 1)
        wire = Duplex(env, LinkParams(10e6, delay))
        conn = relay.connect(FourTuple(CLIENT, port, VIP, 443), (wire.ab,), (wire.ba,))
        config = ClientConfig(rng=seeded_rng(f"client{i}"), cipher_suites=SUITES)
        clients.append(TlsClient(env, conn.tcp, config, timeout=20.0))
        conns.append(conn)
    heard: list[float] = []
    committed: dict[int, int] = {}
    lapses: list[tuple[float, int, int, int]] = []

    def on_commit(conn: RelayConn, cp: Checkpoint, phase: str) -> None:
        if phase == "committed":
            committed[conn.id] = cp.number

    def on_change(change: BucketChange) -> None:
        if env.now < join_at or heard:
            return
        heard.append(env.now)
        if kill_after is not None:
            env.timeout(kill_after).callbacks.append(lambda _: cluster.node(owner).kill())

    def join(_: object) -> None:
        newcomer = cluster.join()
        if mute_newcomer:
            newcomer.mute_updates()

    def watch() -> simpy.events.ProcessGenerator:
        while cluster.node(owner).alive:
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
    env.timeout(join_at).callbacks.append(join)
    if mute_old_at is not None:
        env.timeout(mute_old_at).callbacks.append(
            lambda _: cluster.node(OLD_MIRROR).mute_updates())
    env.process(watch())
    env.run(until=until)
    return Joined(cluster, relay, origin, clients, conns, heard, lapses)


def assert_all_served(j: Joined) -> None:
    """Every client got a byte-identical response; the origin saw each request once."""
    for client, conn in zip(j.clients, j.conns, strict=True):
        assert client.error is None, (conn.id, client.error, conn.takeovers)
        assert bytes(client.response) == j.origin.response
    assert sorted(c for c, _ in j.origin.requests) == [c.id for c in j.conns]


def handoff_changes(j: Joined, bucket: int) -> list[tuple[int | None, int | None]]:
    """(mirror, handoff) of each table change of ``bucket`` the master made."""
    return [(c.mirror, c.handoff) for c in j.cluster.changes if c.bucket == bucket]


def test_owner_dies_after_the_handoff_the_newcomer_takes_over() -> None:
    j = run_join(kill_after=0.005)
    assert_all_served(j)
    assert j.lapses == []
    for conn in j.conns:
        (when, node, how), = conn.takeovers
        assert node == NEWCOMER and how.startswith("checkpoint ")   # from the sent state
        # announced (old mirror kept), switched once the state was there, then the death
        assert handoff_changes(j, conn.bucket)[:2] == [(OLD_MIRROR, NEWCOMER), (NEWCOMER, None)]
    # the transfer: one full update per connection from the owner to the newcomer, all
    # sent before the switch, on the ordinary update channel (and acknowledged there)
    rows = j.relay.updates.frame()
    switch = min(c.time for c in j.cluster.changes if c.mirror == NEWCOMER)
    sent = rows[(rows["kind"] == "update") & (rows["src"] == OWNER)
                & (rows["dst"] == NEWCOMER) & (rows["time"] < switch)]
    assert sorted(c for conns in sent["conns"] for c in conns) == [c.id for c in j.conns]
    acks = rows[(rows["kind"] == "ack") & (rows["src"] == NEWCOMER) & (rows["time"] < switch)]
    assert len(acks) == len(sent)
    assert switch - j.heard[0] < 2e-3       # four full states on the LAN: 1.5 ms


def test_owner_dies_during_the_handoff_the_old_mirror_takes_over() -> None:
    """The owner dies the moment it hears of the join: the newcomer got nothing, the table
    still names the old mirror, which takes every connection over from its checkpoint."""
    j = run_join(kill_after=0.0)
    assert_all_served(j)
    assert j.lapses == []
    for conn in j.conns:
        (when, node, how), = conn.takeovers
        assert node == OLD_MIRROR and how.startswith("checkpoint ")
        assert NEWCOMER not in conn.mirrored
        # announced, then cancelled by the death: the bucket goes to node 0, mirrored by 1
        assert handoff_changes(j, conn.bucket)[:2] == [(OLD_MIRROR, NEWCOMER), (1, None)]
    assert j.cluster.handoffs == {}


def test_control_without_the_handoff_the_owners_death_loses_the_connections() -> None:
    """``mirror_handoff`` off (the behaviour before): node 3 is the mirror at once and holds
    nothing of a connection until that connection's next update.  The owner dies 5 ms
    later: one connection had an update in that time and survives; node 3 takes the three
    others over without knowing them, and they are reset (after 2MSL, so their clients time
    out first)."""
    j = run_join(dataclasses.replace(FAST, mirror_handoff=False), kill_after=0.005)
    assert [client.error for client in j.clients] == [None] + ["timed out"] * 3
    assert [c.takeovers[0][1:] for c in j.conns[1:]] == [(NEWCOMER, "unknown connection")] * 3
    assert j.cluster.changes and all(c.handoff is None for c in j.cluster.changes)
    assert {c for _, c, _, held in j.lapses if held == -1} == {c.id for c in j.conns}


def test_the_mirror_holds_every_commit_through_a_handoff_mid_response() -> None:
    """Clients 5 ms away, the join mid-response, so updates are under way and being captured
    while the bucket is handed over: at every instant the mirror holds each connection's
    committed checkpoint, and without any failure everyone is served."""
    for join_at in (0.05, 0.07, 0.09, 0.11):
        j = run_join(join_at=join_at, delay=0.005, n=6)
        assert_all_served(j)
        assert j.lapses == [], join_at
        assert {c.mirror for c in j.cluster.changes if c.time > join_at} >= {NEWCOMER}
        assert j.cluster.handoffs == {} and j.relay.frozen == {}


def test_a_newcomer_that_does_not_acknowledge_is_reported_and_the_old_mirror_stays() -> None:
    """Node 3 joins but drops every update: the owner's transfer is not acknowledged within
    ``update_timeout``, the owner reports node 3 unfit, the master cancels the handoff and
    the bucket goes on with its old mirror -- frozen no longer than that timeout.  The
    owner's later death is taken over by the old mirror."""
    j = run_join(kill_after=0.7, mute_newcomer=True)
    assert_all_served(j)
    assert j.lapses == []
    (when, node, by), = j.cluster.mirror_faults
    assert (node, by) == (NEWCOMER, OWNER)
    assert when - j.heard[0] < FAST.update_timeout + 2e-3
    assert j.cluster.unfit == {NEWCOMER}
    for conn in j.conns:
        assert [node for _, node, _ in conn.takeovers] == [OLD_MIRROR]
        assert handoff_changes(j, conn.bucket)[:2] == [(OLD_MIRROR, NEWCOMER),
                                                       (OLD_MIRROR, None)]



def test_an_update_pending_at_a_silent_old_mirror_goes_to_the_newcomer_at_the_switch() -> None:
    """Node 0 (the old mirror) goes silent 5 ms before node 3 joins, so updates wait for its
    acknowledgement.  The handoff sends node 3 each connection's newest checkpoint (the one
    waiting); at the switch the owner sends the waiting update to the new mirror, whose
    acknowledgement commits it -- long before ``update_timeout`` would have reported
    node 0.  (The transfer must not count as the pending update's send: else the owner
    would take node 3 for the node that does not acknowledge, and report it.)"""
    mute_at = 0.085
    j = run_join(join_at=mute_at + 0.005, delay=0.005, n=6, mute_old_at=mute_at)
    assert_all_served(j)
    rows = j.relay.updates.frame()
    late = rows[rows["time"] >= mute_at]
    stuck = late[(late["kind"] == "update") & (late["dst"] == OLD_MIRROR)]
    assert len(stuck) > 0                                      # updates did wait on node 0
    assert not ((late["kind"] == "ack") & (late["src"] == OLD_MIRROR)).any()
    assert j.relay.mirror_faults == [] and j.cluster.unfit == set()
    assert j.lapses == []



def test_a_join_during_a_takeover_hands_over_the_state_the_new_owner_took_over() -> None:
    """Four nodes; the owner (node 2) dies at a ``response`` update it has captured but not
    sent, so the mirror (node 3) takes over from the update before.  Node 4 joins while node
    3 is still importing that state (the master admits it at once): in the new ring node 4
    mirrors node 3's buckets, so node 3 hands the bucket over -- with the checkpoint it took
    over from, not the dead owner's newer one that never reached it."""
    sent: list[tuple[int, int]] = []              # (addressee, checkpoint number)

    def setup(cluster: Cluster, relay: Relay) -> None:
        send = relay.updates.send

        def record(src: Node, dst: int, conn: int, msg: bytes, *args: Any) -> None:
            sent.append((dst, Checkpoint.decode(msg).number))
            send(src, dst, conn, msg, *args)

        def on_change(change: BucketChange) -> None:
            if change.owner == 3 and change.old_owner == OWNER and 4 not in cluster.members:
                cluster._add(cluster.join().id)      # admitted at once, mid-import

        relay.updates.send = record              # type: ignore[method-assign]
        cluster.subscribe(on_change)

    r = run(kill_owner("response", "prepared", 2), FAST, nodes=4, port=client_port(4, OWNER),
            setup=setup)
    assert_served(r)
    (when, node, how), = r.conn.takeovers
    assert node == 3 and how.endswith("(response)")
    took = int(how.split()[1])
    newest = max(i for i, c in enumerate(r.conn.checkpoints) if c[3] == OWNER)
    assert took == newest - 1                     # node 3 never got the newest
    assert next(n for dst, n in sent if dst == 4) == took
    assert [(c.mirror, c.handoff) for c in r.cluster.changes
            if c.bucket == r.conn.bucket][:3] == [(0, None), (0, 4), (4, None)]


def test_a_lone_node_hands_its_connections_to_the_first_node_that_joins() -> None:
    """One node serves alone (no mirror: it commits unmirrored).  Node 1 joins: the buckets
    keep having no mirror until the owner has sent node 1 their state, then node 1 mirrors
    them and takes them over when the owner dies."""
    j = run_join(kill_after=0.005, nodes=1, owner=0)
    assert_all_served(j)
    assert j.lapses == []
    for conn in j.conns:
        assert [(node, how.split()[0]) for _, node, how in conn.takeovers] == [(1, "checkpoint")]
        assert [(c.mirror, c.handoff) for c in j.cluster.changes
                if c.bucket == conn.bucket][:2] == [(None, 1), (1, None)]
