"""Synthetic workload generator: determinism, statistics, fitting."""

from __future__ import annotations

from dataclasses import replace

import pandas as pd
import pytest

from sslsplit.synth import LCS_LIKE, SynthParams, fit_params, generate, scaled
from testbed.traces.stats import compressibility, repetition_vs_window

SMALL = replace(scaled(LCS_LIKE, 0.02), days=60.0)


def test_deterministic_and_well_formed() -> None:
    a, b = generate(SMALL), generate(SMALL)
    pd.testing.assert_frame_equal(a, b)
    c = generate(replace(SMALL, seed=2))
    assert not a["obj"].equals(c["obj"])
    assert a["time"].is_monotonic_increasing
    assert (a["size"] > 0).all()
    assert len(a) == pytest.approx(SMALL.expected_requests, rel=0.05)
    # objects are (file, version) pairs: one size per object
    assert (a.groupby("obj")["size"].nunique() == 1).all()
    assert a["obj"].nunique() >= a["url"].nunique()


def test_long_term_repetition_grows_with_window() -> None:
    w = generate(SMALL)
    r = repetition_vs_window(w, (1, 7, 10_000), samples=6, seed=0)
    med = r.groupby("window_days")["compressibility"].median().to_numpy()
    assert med[0] < med[1] < med[2]
    assert 1.2 < med[0] < 4 and med[2] > 3


def test_fit_params_recovers_a_generated_trace() -> None:
    truth = replace(SMALL, zipf_alpha=0.9)
    w = generate(truth)
    fit = fit_params(w)
    assert fit.days == pytest.approx(truth.days, rel=0.05)
    assert fit.requests_per_day == pytest.approx(truth.requests_per_day, rel=0.05)
    assert fit.size_median == pytest.approx(truth.size_median, rel=0.3)
    assert 0.5 < fit.zipf_alpha < 1.3
    regenerated = generate(fit)
    assert compressibility(regenerated) > 1.0


def test_fit_params_on_a_real_trace(epa_work: pd.DataFrame) -> None:
    fit = fit_params(epa_work)
    assert fit.days == pytest.approx(1.0, abs=0.01)
    assert fit.requests_per_day == pytest.approx(35_291, rel=0.01)
    assert fit.n_objects == 5_038
    assert 1_000 < fit.size_median < 5_000
    with pytest.raises(ValueError):
        fit_params(epa_work.iloc[:0])


def test_validation() -> None:
    with pytest.raises(ValueError):
        SynthParams(hot_fraction=1.5)
    with pytest.raises(ValueError):
        SynthParams(days=0)
    with pytest.raises(ValueError):
        scaled(LCS_LIKE, 0)
