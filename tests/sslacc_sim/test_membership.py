"""One node's view of the cluster (:mod:`sslacc_sim.membership`): deaths and joins declared by
the master alone, tables applied by epoch, the wire form fuzzed."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sslacc_sim.buckets import BucketTable
from sslacc_sim.membership import Membership, TableError, decode_table, encode_table

D = 0.2  # detection time


def _nodes(n: int = 3, buckets: int = 6) -> list[Membership]:
    return [Membership(i, n, buckets, D, now=0.0) for i in range(n)]


def _hear_all_but(nodes: list[Membership], silent: set[int], now: float) -> None:
    for listener in nodes:
        for speaker in range(len(nodes)):
            if speaker not in silent:
                listener.heard(speaker, now)


def test_the_master_alone_declares_a_death_and_every_node_applies_its_table() -> None:
    a, b, c = nodes = _nodes()
    _hear_all_but(nodes, {1}, 0.15)
    assert a.handle_timer(0.1) == [] and a.get_timer() == pytest.approx(D)
    assert b.handle_timer(0.3) == [] and c.handle_timer(0.3) == []  # not masters
    (update,) = a.handle_timer(0.3)
    assert update.epoch == 1 and update.reason == "node 1 died"
    assert a.table.members == [0, 2] and a.table.owner == [0, 2, 2, 0, 2, 2]
    gains = c.receive_table(update.data)
    assert gains is not None and gains.owned == (1, 4) and gains.lost == ()
    assert c.table.owner == a.table.owner and c.table.mirror == a.table.mirror
    assert c.receive_table(update.data) is None  # twice: nothing
    assert c.receive_table(encode_table(0, BucketTable(3, 6))) is None  # older: nothing
    assert a.handle_timer(0.31) == []  # nothing new


def test_when_the_master_dies_the_next_lowest_takes_over_its_role() -> None:
    a, b, c = nodes = _nodes()
    _hear_all_but(nodes, {0}, 0.15)
    assert not b.is_master(0.1) and b.is_master(0.3)
    (update,) = b.handle_timer(0.3)
    assert update.reason == "node 0 died" and b.table.master == 1
    gains = c.receive_table(update.data)
    assert gains is not None and c.table.members == [1, 2]


def test_a_node_that_joins_takes_idle_buckets() -> None:
    a = Membership(0, 2, 8, D, now=0.0)
    a.heard(1, 0.1)
    a.heard(2, 0.1)  # a third node's keepalives
    (update,) = a.handle_timer(0.15, busy={0, 1, 2})
    assert update.reason == "node 2 joined" and a.table.owned_by(2) == [3, 4]
    other = Membership(1, 2, 8, D, now=0.0)  # node 1, still at epoch 0
    gains = other.receive_table(update.data)
    assert gains is not None and gains.lost == (3,) and gains.owned == ()
    joiner = Membership(2, 3, 8, D, now=0.0)
    gains = joiner.receive_table(update.data)
    assert gains is not None and gains.lost == (2, 5) and joiner.table.owned_by(2) == [3, 4]


def test_bad_arguments_and_a_table_of_another_size_are_refused() -> None:
    with pytest.raises(ValueError, match="not one of"):
        Membership(3, 3, 6, D, now=0.0)
    with pytest.raises(ValueError, match="positive"):
        Membership(0, 3, 6, 0.0, now=0.0)
    with pytest.raises(TableError, match="this cluster has 6"):
        _nodes()[0].receive_table(encode_table(5, BucketTable(3, 7)))


def test_inconsistent_tables_are_refused() -> None:
    good = json.loads(encode_table(3, BucketTable(3, 3)))
    for key, value in (("members", [2, 1]), ("members", [0, 0, 1]), ("owner", [0, 1, 7]),
                       ("mirror", [0, 2, 0]), ("mirror", [1, 2]), ("unfit", [9]),
                       ("epoch", -1), ("epoch", True), ("owner", [0, 1.0, 2]), ("owner", [])):  # fmt: skip
        with pytest.raises(TableError):
            decode_table(json.dumps({**good, key: value}).encode())


@settings(max_examples=200, deadline=None)
@given(st.integers(1, 5), st.integers(1, 30), st.lists(st.integers(0, 4), max_size=4),
       st.integers(0, 1 << 40))  # fmt: skip
def test_every_table_round_trips(n: int, buckets: int, deaths: list[int], epoch: int) -> None:
    table = BucketTable(n, buckets)
    for dead in deaths:
        if dead in table.members and len(table.members) > 1:
            table.remove(dead)
    got_epoch, got = decode_table(encode_table(epoch, table))
    assert got_epoch == epoch and (got.members, got.owner, got.mirror, got.unfit) == \
        (table.members, table.owner, table.mirror, table.unfit)


@settings(max_examples=400, deadline=None)
@given(st.one_of(st.binary(max_size=200), st.recursive(
    st.none() | st.booleans() | st.integers(-3, 9) | st.text(max_size=4),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(
        st.sampled_from(["epoch", "members", "unfit", "owner", "mirror"]), inner, max_size=5),
    max_leaves=12).map(lambda v: json.dumps(v).encode())))  # fmt: skip
def test_the_table_parser_raises_only_table_errors(data: bytes) -> None:
    try:
        decode_table(data)
    except TableError:
        pass
