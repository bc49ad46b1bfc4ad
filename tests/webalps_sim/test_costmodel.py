"""The 4758 cost model: service times, calibration to the paper, sleeping, counters."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from webalps_sim.aio.coprocessor import CoprocessorCostModel, NullCostModel, make_cost_model
from webalps_sim.costmodel import (
    DEFAULT_PROFILE,
    OPS,
    PAPER_EXTRA_PER_REQUEST_S,
    Card4758,
    CostAccount,
    CostModelError,
    calibrate_transfer_latency,
)


def test_service_times_grow_with_bytes_and_unknown_ops_fail() -> None:
    card = Card4758()
    assert card.seconds("seal", 16_384) > card.seconds("seal", 16) > card.record_call_s
    assert card.seconds("transfer", 10_000) - card.seconds("transfer", 0) == pytest.approx(
        10_000 / card.transfer_bytes_per_s)
    assert card.seconds("rsa", 1) == card.seconds("rsa", 10_000) == card.rsa_s
    with pytest.raises(CostModelError, match="unknown operation"):
        card.seconds("decrypt", 1)
    with pytest.raises(ValueError, match="rsa_s must be positive"):
        Card4758(rsa_s=0)


def test_the_default_card_reproduces_table_1_by_construction() -> None:
    """The tuned constant is what calibration gives for the default profile (86.2 ms extra)."""
    tuned = calibrate_transfer_latency(Card4758(rsa_s=1e-3), DEFAULT_PROFILE)
    assert sum(tuned.profile_seconds(DEFAULT_PROFILE).values()) == pytest.approx(
        PAPER_EXTRA_PER_REQUEST_S)
    default = Card4758()
    assert sum(default.profile_seconds(DEFAULT_PROFILE).values()) == pytest.approx(
        PAPER_EXTRA_PER_REQUEST_S, rel=0.01)
    assert calibrate_transfer_latency(default, DEFAULT_PROFILE).transfer_latency_s == (
        pytest.approx(default.transfer_latency_s, rel=0.01))


def test_calibration_refuses_impossible_targets() -> None:
    with pytest.raises(CostModelError, match="no transfer"):
        calibrate_transfer_latency(Card4758(), [("rsa", 0)])
    with pytest.raises(CostModelError, match="> target"):
        calibrate_transfer_latency(Card4758(rsa_s=1.0), DEFAULT_PROFILE)


def test_charge_sleeps_the_modelled_time_and_counts() -> None:
    card = Card4758(transfer_latency_s=0.02)
    model = CoprocessorCostModel(card)
    start = time.perf_counter()
    for _ in range(3):
        model.charge("transfer", 100)
    elapsed = time.perf_counter() - start
    assert elapsed >= 3 * card.seconds("transfer", 100)
    assert model.account.calls["transfer"] == 3
    assert model.account.nbytes["transfer"] == 300
    assert model.account.seconds["transfer"] == pytest.approx(3 * card.seconds("transfer", 100))


def test_off_is_free_but_still_counts() -> None:
    model = make_cost_model("off", environ={})
    assert isinstance(model, NullCostModel) and not isinstance(model, CoprocessorCostModel)
    start = time.perf_counter()
    for _ in range(1000):
        model.charge("seal", 2048)
    assert time.perf_counter() - start < 0.5
    assert model.account.calls["seal"] == 1000 and model.account.seconds["seal"] == 0.0
    with pytest.raises(CostModelError):
        model.charge("bogus", 1)


def test_make_cost_model_names_and_stats_file(tmp_path: Path) -> None:
    stats = tmp_path / "stats.json"
    model = make_cost_model("4758", environ={"WEBALPS_COST_STATS": str(stats)})
    assert isinstance(model, CoprocessorCostModel)
    model.card = Card4758(transfer_latency_s=1e-4, rsa_s=1e-4, record_call_s=1e-4,
                          finished_s=1e-4)
    for op in OPS:
        model.charge(op, 10)
    model.write_stats()
    ops = CostAccount.read(stats)
    assert {op: ops[op]["calls"] for op in OPS} == dict.fromkeys(OPS, 1)
    assert json.loads(stats.read_text())["model"] == "4758"
    with pytest.raises(CostModelError, match="unknown cost model"):
        make_cost_model("hsm")
