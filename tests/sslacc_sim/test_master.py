"""The master failing mid-connection, and successive failures (issue 11, "must show").

The master (the live node with the lowest id, here node 0 until it dies) is the only node that
changes the bucket table.  Each test places the connection's bucket so that the master plays
a chosen part (owner, mirror, bystander), kills it mid-connection and checks that a new
master is chosen, reassigns the buckets, and the real ``tls12`` client still gets a
byte-identical response with the origin seeing the request once.
"""

from __future__ import annotations

import pytest

from sslacc_sim import Checkpoint, Cluster, ClusterParams, RelayConn

from .helpers import Kill, Run, assert_served, client_port, kill_owner, run


def kill_node(node: int, label: str, phase: str, nth: int = 0) -> Kill:
    """Kill node ``node`` at the ``nth`` checkpoint labelled ``label``, in ``phase``."""
    done: list[bool] = []

    def kill(cluster: Cluster, conn: RelayConn, cp: Checkpoint, now: str) -> None:
        if done or cp.label != label or now != phase:
            return
        if sum(1 for c in conn.checkpoints if c[1] == label) == nth + 1:
            done.append(True)
            cluster.node(node).kill()

    return kill


def both(*kills: Kill) -> Kill:
    def kill(cluster: Cluster, conn: RelayConn, cp: Checkpoint, phase: str) -> None:
        for k in kills:
            k(cluster, conn, cp, phase)

    return kill


def deaths(r: Run) -> list[tuple[int, int]]:
    """(dead node, declared by) in order."""
    return [(dead, by) for _, dead, by in r.cluster.deaths]


@pytest.mark.parametrize(("label", "phase", "nth"), [
    ("client_key_exchange", "committed", 0),
    ("finished", "released", 0),
    ("response", "released", 2),
    ("alert_received", "committed", 0),
])
def test_master_that_owns_the_connection_dies(label: str, phase: str, nth: int) -> None:
    r = run(kill_owner(label, phase, nth), port=client_port(3, owner=0))
    assert r.conn.checkpoints[0][3] == 0
    assert_served(r)
    assert deaths(r) == [(0, 1)]                       # node 1 became master and saw it
    assert r.cluster.master().id == 1 and r.cluster.node(1).is_master()
    (when, node, how), = r.conn.takeovers
    assert node == 1 and how.endswith(f"({label})")
    assert 0 not in r.cluster.owner and 0 not in r.cluster.mirror


def test_master_that_mirrors_the_connection_dies_under_a_pending_commit() -> None:
    # owner 2, mirror 0 (the next member after 2): the master holds the mirrored state
    r = run(kill_node(0, "finished", "sent"), port=client_port(3, owner=2))
    assert r.conn.checkpoints[0][3] == 2
    assert_served(r)
    assert deaths(r) == [(0, 1)]
    assert r.conn.takeovers == []                       # the owner lives: only re-mirrored
    assert r.cluster.mirror[r.conn.bucket] == 1
    assert r.conn.mirrored[1].label == r.conn.checkpoints[-1][1]


def test_bystander_master_dies_then_the_owner_the_last_node_finishes() -> None:
    # owner 1, mirror 2; the master (0) dies first, then the owner, who had become master
    # (keepalives every 10 ms, so node 1 is master before the owner's death)
    r = run(both(kill_node(0, "client_hello", "committed"),
                 kill_owner("response", "released", 2)),
            ClusterParams(keepalive_interval=0.01), port=client_port(3, owner=1))
    assert_served(r)
    assert r.cluster.deaths[0][0] < r.conn.takeovers[0][0]
    assert deaths(r) == [(0, 1), (1, 2)]
    assert r.cluster.master().id == 2
    (when, node, how), = r.conn.takeovers
    assert node == 2 and how.endswith("(response)")


def test_master_and_owner_fail_at_the_same_instant() -> None:
    def kill(cluster: Cluster, conn: RelayConn, cp: Checkpoint, phase: str) -> None:
        if cp.label == "response" and phase == "committed" and cluster.node(0).alive:
            cluster.node(0).kill()
            cluster.node(conn.handler).kill()

    r = run(kill, port=client_port(3, owner=1))
    assert_served(r)
    assert sorted(deaths(r)) == [(0, 2), (1, 2)]        # node 2 is master and owner at once
    assert [t[1] for t in r.conn.takeovers] == [2]


@pytest.mark.parametrize(("first", "second"), [
    (("client_key_exchange", "committed", 0), ("takeover", "committed", 0)),
    (("client_hello", "released", 0), ("finished", "committed", 0)),
    (("response", "released", 1), ("response", "sent", 3)),
    (("response", "committed", 2), ("alert_received", "released", 0)),
])
def test_owner_dies_then_the_node_that_took_over_dies(first: tuple[str, str, int],
                                                       second: tuple[str, str, int]) -> None:
    """Two successive failures: the second one hits the node that took over (in the
    "takeover" case at the very first checkpoint it makes as the new owner)."""
    r = run(both(kill_owner(*first), kill_owner(*second)), port=client_port(3, owner=0))
    assert_served(r)
    assert deaths(r) == [(0, 1), (1, 2)]               # the master changed each time
    assert [t[1] for t in r.conn.takeovers] == [1, 2]
    assert r.conn.takeovers[1][2].endswith(f"({second[0]})")
