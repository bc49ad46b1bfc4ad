"""Cost model: structural byte counts, linear fits, the paper's marginals.

These tests check the model's *code* (arithmetic, fitting, thresholds). They do not validate
the model against reality: that is done against measured replays and the paper's published
points in ``tests/sslsplit/test_split_experiments.py`` (held-out replay, paper comparison).
"""

from __future__ import annotations

import numpy as np
import pytest

from sslsplit.costmodel import (
    SIZE_SWEEP,
    LinearCost,
    Protocol,
    SplittingCostModel,
    WireModel,
    WireParams,
    paper_model,
)


def test_linear_fit_internal_consistency_with_wire_model() -> None:
    """Internal consistency only, not validation: the linear model is *fitted to* the
    structural WireModel, so this checks the least-squares code and that a piecewise line can
    describe the structural counts (within 5 %, as the paper's line described its runs)."""
    wire = WireModel()
    model = SplittingCostModel.fit(wire)
    for proto in Protocol:
        err = np.abs(model.bytes(proto, SIZE_SWEEP) / wire.server_bytes(proto, SIZE_SWEEP) - 1)
        assert err.max() < 0.05, proto


def test_http_bytes_by_hand() -> None:
    p = WireParams()
    wire = WireModel(p)
    # 10,000 B body + 290 B header = 10,290 B → 8 segments of ≤1448 B, plus 4 control packets
    expected = 4 * 52 + 290 + 10_000 + 8 * 52
    assert wire.server_bytes("http", [10_000])[0] == expected


def test_split_hit_marginals_and_thresholds() -> None:
    wire = WireModel()
    s = np.array([100_000.0, 200_000.0])
    b = wire.server_bytes(Protocol.SPLIT_HIT, s)
    marginal = (b[1] - b[0]) / (s[1] - s[0])
    assert 1 / 400 < marginal < 1 / 200          # paper: ≈ 1/250
    big = np.array([5e6, 6e6])
    bb = wire.server_bytes(Protocol.SPLIT_HIT, big)
    assert (bb[1] - bb[0]) / 1e6 == pytest.approx(2 * marginal, rel=0.15)   # 8 KiB records
    small = wire.server_bytes(Protocol.SPLIT_HIT, [100, 3_999])
    assert (small[1] - small[0]) / 3_899 > 1.0    # header and data share a record
    assert wire.server_bytes(Protocol.SPLIT_HIT, [4_000])[0] < small[0]


def test_wire_model_of_paper_setup_near_figure_8_points() -> None:
    # WireParams' defaults are typical Apache 1.3 / OpenSSL 0.9.6 sizes, not measurements; this
    # checks they land near the two numbers §6.2 states (sslsplit.paper_points)
    wire = WireModel()
    hit_100 = wire.server_bytes("split_hit", [100])[0]
    http_100 = wire.server_bytes("http", [100])[0]
    assert 2.0 < hit_100 / http_100 < 4.0        # "HTTP about one-third the cost"
    saving = 1 - wire.server_bytes("split_hit", [1e6])[0] / wire.server_bytes("http", [1e6])[0]
    assert saving == pytest.approx(0.995, abs=0.002)   # "99.5 % over HTTP" at 1 MB


def test_paper_model_marginals() -> None:
    m = paper_model()
    hit = m.costs[Protocol.SPLIT_HIT]
    assert hit.marginal[1] == pytest.approx(1 / 250) and hit.marginal[2] == pytest.approx(1 / 120)
    assert hit.starts == (0, 4_000, (1 << 22) + 1)
    for proto in (Protocol.HTTP, Protocol.HTTPS, Protocol.SPLIT_MISS):
        assert all(1.0 < mg < 1.1 for mg in m.costs[proto].marginal)   # "slightly above one"
    assert m.round_trips[Protocol.HTTPS] == m.round_trips[Protocol.HTTP] + 2


def test_from_table_recovers_known_lines() -> None:
    sizes = np.array([100, 1000, 3000, 5000, 50_000, 500_000, 5_000_000, 8_000_000], float)
    truth = {
        "http": 500 + 1.03 * sizes,
        "https": 1800 + 1.04 * sizes,
        "split_miss": 1900 + 1.05 * sizes,
        "split_hit": np.where(sizes < 4000, 1100 + 1.04 * sizes,
                              np.where(sizes > 2**22, 1200 + sizes / 120, 1150 + sizes / 250)),
    }
    m = SplittingCostModel.from_table(sizes, truth)
    for proto, b in truth.items():
        np.testing.assert_allclose(m.bytes(proto, sizes), b, rtol=1e-9)


def test_linear_cost_rejects_malformed_pieces() -> None:
    with pytest.raises(ValueError):
        LinearCost((1,), (0.0,), (1.0,))
    with pytest.raises(ValueError):
        LinearCost((0, 5, 5), (0.0, 0.0, 0.0), (1.0, 1.0, 1.0))
    with pytest.raises(ValueError):
        SplittingCostModel({Protocol.HTTP: LinearCost((0,), (0.0,), (1.0,))}, {})
    lc = LinearCost((0, 10), (1.0, 100.0), (2.0, 0.5))
    np.testing.assert_allclose(lc([0, 9, 10, 20]), [1, 19, 105, 110])
