"""Membership: keepalive failure detection, master failover, join and leave."""

from __future__ import annotations

import simpy

from sslacc_sim import BucketChange, Cluster, ClusterParams

P = ClusterParams(keepalive_interval=0.1, dead_after=3)


def _cluster(n: int) -> tuple[simpy.Environment, Cluster, list[BucketChange]]:
    env = simpy.Environment()
    cluster = Cluster(env, n, P)
    heard: list[BucketChange] = []
    cluster.subscribe(heard.append)
    return env, cluster, heard


def test_initial_table_spreads_buckets_and_mirrors_on_the_next_node() -> None:
    env, cluster, _ = _cluster(3)
    counts = [cluster.owner.count(i) for i in range(3)]
    assert max(counts) - min(counts) <= 1 and sum(counts) == P.buckets
    assert all(m == (o + 1) % 3 for o, m in zip(cluster.owner, cluster.mirror, strict=True))


def test_dead_node_is_detected_and_its_buckets_go_to_their_mirrors() -> None:
    env, cluster, heard = _cluster(3)
    env.run(until=1.0)
    assert cluster.deaths == [] and heard == []
    owned = [b for b in range(P.buckets) if cluster.owner[b] == 1]
    mirrors = {b: cluster.mirror[b] for b in owned}
    cluster.node(1).kill()
    env.run(until=2.0)
    (when, dead, by), = cluster.deaths
    assert dead == 1 and by == 0
    # last keepalive at most one interval before the kill; checks every half interval
    k = P.keepalive_interval
    assert P.detection_time - k <= when - 1.0 <= P.detection_time + k
    assert all(cluster.owner[b] == mirrors[b] for b in owned)
    assert 1 not in cluster.owner and 1 not in cluster.mirror
    assert {c.bucket for c in heard if c.old_owner == 1} == set(owned)


def test_master_failure_makes_the_next_node_master() -> None:
    env, cluster, _ = _cluster(3)
    env.run(until=1.0)
    cluster.node(0).kill()
    env.run(until=2.0)
    assert cluster.deaths[0][1:] == (0, 1)      # node 1 declared node 0 dead
    assert cluster.master().id == 1 and cluster.node(1).is_master()
    assert 0 not in cluster.owner


def test_join_takes_idle_buckets_and_leave_hands_them_back() -> None:
    env, cluster, _ = _cluster(2)
    cluster.busy_buckets.add(0)
    env.run(until=0.5)
    new = cluster.join()
    env.run(until=1.5)
    assert new.id in cluster.members
    assert cluster.owner.count(new.id) == P.buckets // 3
    assert cluster.owner[0] == 0                  # a bucket with a connection does not move
    cluster.leave(new.id)
    env.run(until=2.0)
    assert new.id not in cluster.owner and not new.alive
