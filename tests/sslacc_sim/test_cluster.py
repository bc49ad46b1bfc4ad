"""Membership: keepalive failure detection, master failover, join and leave, reports re-sent."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import simpy

from sslacc_sim import BucketChange, Cluster, ClusterParams, Node

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


def _record_reports(cluster: Cluster) -> list[tuple[float, int, object]]:
    """(time, addressee, what) of every report message sent to a master."""
    sent: list[tuple[float, int, object]] = []
    send = cluster.lan.send

    def record(src: Node, dst: Node, size: int, on_arrive: Callable[[Any], object],
               payload: Any = None) -> None:
        if isinstance(payload, tuple):
            sent.append((cluster.env.now, dst.id, payload))
        send(src, dst, size, on_arrive, payload)

    cluster.lan.send = record                    # type: ignore[method-assign]
    return sent


def test_a_report_that_arrives_is_sent_once() -> None:
    env, cluster, _ = _cluster(4)
    sent = _record_reports(cluster)
    env.run(until=1.0)
    cluster.report_unfit_mirror(3, 2)
    env.run(until=2.0)
    assert [(dst, what) for _, dst, what in sent] == [(0, ("unfit", 3))]
    assert cluster.unfit == {3} and [f[1:] for f in cluster.mirror_faults] == [(3, 2)]


def test_a_report_lost_with_the_master_goes_again_to_the_next_master() -> None:
    """The report travels to node 0, which dies before it arrives.  The reporter sends it
    again every ``report_interval``: to node 0 while the table still names it master (lost
    too), then once to node 1, the new master, which acts on it."""
    env, cluster, _ = _cluster(4)
    sent = _record_reports(cluster)
    env.run(until=1.0)
    cluster.report_unfit_mirror(3, 2)
    cluster.node(0).kill()
    env.run(until=2.0)
    (died, dead, by), = cluster.deaths
    assert (dead, by) == (0, 1)
    to = [dst for _, dst, _ in sent]
    assert to[0] == 0 and to[-1] == 1 and to.count(1) == 1
    assert all(t - 1.0 == pytest.approx(i * P.report_interval)
               for i, (t, _, _) in enumerate(sent))
    (when, node, reporter), = cluster.mirror_faults
    assert (node, reporter) == (3, 2) and died < when <= died + P.report_interval
    assert cluster.unfit == {3} and 3 not in cluster.mirror
