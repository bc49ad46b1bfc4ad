"""The sans-IO bucket table (:class:`sslacc_sim.buckets.BucketTable`): the rules the SimPy model
and the real Linux cluster share, checked as invariants over random sequences of deaths, joins
and unfit mirrors (Hypothesis), and on the cases the paper describes."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sslacc_sim.buckets import BucketTable, ClusterError


def _check(table: BucketTable) -> None:
    fit = [m for m in table.members if m not in table.unfit]
    for b in range(table.buckets):
        assert table.owner[b] in table.members
        mirror = table.mirror[b]
        if mirror is None:
            assert not [m for m in fit if m != table.owner[b]]  # nobody else could mirror it
        else:
            assert mirror in fit and mirror != table.owner[b]


def test_the_start_is_round_robin_with_the_next_node_as_mirror() -> None:
    table = BucketTable(3, 9)
    assert table.owner == [0, 1, 2] * 3 and table.mirror == [1, 2, 0] * 3
    assert table.master == 0 and table.owned_by(1) == [1, 4, 7] and table.mirrored_by(0) == [2, 5, 8]


def test_a_death_gives_each_bucket_to_its_mirror() -> None:
    table = BucketTable(3, 6)
    moved = table.remove(1)
    assert table.owner == [0, 2, 2, 0, 2, 2] and table.master == 0
    assert table.mirror == [2, 0, 0, 2, 0, 0]
    assert {b for b, old in moved if old == 1} == {1, 4}
    table.remove(0)
    assert table.owner == [2] * 6 and table.mirror == [None] * 6 and table.master == 2
    with pytest.raises(ClusterError, match="no live node"):
        table.remove(2)


def test_a_join_takes_only_idle_buckets_up_to_an_even_share() -> None:
    table = BucketTable(2, 8)
    moved = table.add(2, busy={0, 1, 2})
    assert [b for b, _ in moved] == [3, 4] and table.owned_by(2) == [3, 4]
    with pytest.raises(ClusterError, match="already a member"):
        table.add(2)


def test_an_unfit_mirror_is_replaced() -> None:
    table = BucketTable(3, 3)
    assert table.mark_unfit(1) == [(0, 0)] and table.mirror == [2, 2, 0]
    assert table.mark_unfit(1) is None and table.mark_unfit(7) is None


@settings(max_examples=300, deadline=None)
@given(st.integers(1, 5), st.integers(1, 40),
       st.lists(st.tuples(st.sampled_from(["remove", "add", "unfit"]), st.integers(0, 9),
                          st.sets(st.integers(0, 39), max_size=10)), max_size=12))  # fmt: skip
def test_every_sequence_keeps_the_table_consistent(n: int, buckets: int,
                                                   steps: list[tuple[str, int, set[int]]]) -> None:  # fmt: skip
    table = BucketTable(n, buckets)
    _check(table)
    for op, node, busy in steps:
        before_owner = list(table.owner)
        before_mirror = list(table.mirror)
        if op == "remove":
            if node not in table.members or len(table.members) == 1:
                continue
            table.remove(node)
            for b in range(buckets):
                if before_owner[b] != node:
                    assert table.owner[b] == before_owner[b]  # only the dead node's buckets move
                elif before_mirror[b] in table.members:
                    assert table.owner[b] == before_mirror[b]  # to the node holding their state
        elif op == "add":
            if node in table.members:
                continue
            moved = table.add(node, busy)
            assert not {b for b, _ in moved} & busy
            assert len(moved) <= buckets // len(table.members)
            assert all(table.owner[b] == node for b, _ in moved)
        else:
            table.mark_unfit(node)
            assert table.owner == before_owner
        _check(table)
