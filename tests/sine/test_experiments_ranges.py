"""Chain vs tree experiments: the measured CPU cases, the overhead table, the modelled costs."""

from __future__ import annotations

import pytest

from sine.algorithms import SigningKey
from sine.experiments.ranges import (
    GOAL_CHAIN_MIN,
    GOAL_TREE_MAX,
    POSITIONS,
    calibration,
    cpu_table,
    goal_check,
    measure_verify_cpu,
    overhead_table,
    range_costs,
    verify_cases,
)
from sine.model_ranges import GROUP_SIZES, MIB, MODES, TREE_MODES, VerifyCpu, head_sizes


def test_verify_cases_release_their_bytes(ed_key: SigningKey) -> None:
    """Every mode at 1 and 64 KiB: the real verifier releases the document (or the 1 MiB
    range), and the plain hash runs over as many bytes."""
    cases = verify_cases(2 * MIB, (1024, 65536), ed_key)
    assert {(c.mode, c.kind) for c in cases} == {(m, "stream") for m in MODES} | {
        (m, "slice") for m in TREE_MODES}
    for c in cases:
        assert c.verify() == (MIB if c.kind == "slice" else 2 * MIB)
        assert c.nbytes >= MIB
        c.plain()
    with pytest.raises(ValueError):
        verify_cases(MIB, (1024,), ed_key)


def test_measured_cpu_feeds_the_model(ed_key: SigningKey) -> None:
    figures = measure_verify_cpu(True, repeats=2, group_sizes=(4096,), key=ed_key)
    table = cpu_table(figures)
    assert len(table) == len(MODES) + len(TREE_MODES)
    assert (table.verify_ms_per_MB > 0).all() and (table.plain_ms_per_MB > 0).all()
    assert (table.repeats == 2).all() and (table.ratio_min <= table.ratio).all()
    assert table.kind_of_number.str.startswith("measured").all()
    cpu = calibration(figures)
    assert set(cpu.per_byte) == {(f.kind, f.mode, 4096) for f in figures}
    assert "measured" in cpu.source and all(v > 0 for v in cpu.per_byte.values())


def test_overhead_table_is_the_formats(rsa_key: SigningKey) -> None:
    table = overhead_table(key=rsa_key)
    assert len(table) == len(MODES) * len(GROUP_SIZES)
    assert table.kind.str.startswith("true by construction").all()
    at = table.set_index(["mode", "group_KiB"])
    heads = head_sizes(rsa_key, "/video.bin", 10**9)
    # 1 GB at 1 KiB: 976,563 groups, 976,562 parents of 64 bytes, plus the signed head
    assert at.loc[("tree-sha256", 1), "whole_overhead_bytes"] == heads.tree_tag + 64 * 976_562
    assert at.loc[("sine-separate", 1), "whole_overhead_bytes"] == heads.sine_tag + 32 * 976_562
    for mode in TREE_MODES:
        assert (at.loc[mode, "range90_over_range"] < 1.1).all()
    for mode in ("sine-inline", "sine-separate", "mice"):
        assert (at.loc[mode, "range90_over_range"] > 800).all()


def test_range_costs_and_the_goal(rsa_key: SigningKey) -> None:
    """One client line, two sizes: every mode and position has a row; the goal check reads
    the worst tree and the best chain at 90 %."""
    heads = head_sizes(rsa_key, "/video.bin", 10**9)
    costs = range_costs(VerifyCpu.none(), client_bw=(100e6,), group_sizes=(1024, 65536),
                        heads=heads)
    assert len(costs) == (1 + len(POSITIONS)) * len(MODES) * 2
    assert set(costs.position_pct) == {0, 10, 50, 90}
    ranged = costs[costs.position_pct > 0]
    assert (ranged.ratio >= 1).all() and costs[costs.position_pct == 0].ratio.isna().all()
    assert costs.kind.str.startswith("modelled").all()
    goal = goal_check(costs).iloc[0]
    at90 = ranged[ranged.position_pct == 90]
    assert goal.tree_worst_ratio == at90[at90.family == "tree"].ratio.max()
    assert goal.chain_least_ratio == at90[at90.family == "chain"].ratio.min()
    assert goal.tree_goal_met == (goal.tree_worst_ratio <= GOAL_TREE_MAX)
    assert goal.chain_goal_met == (goal.chain_least_ratio >= GOAL_CHAIN_MIN)
