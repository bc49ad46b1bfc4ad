"""Figure 12 measured over the kernel ADSL line (sslsplit.experiments.link).

The figure and recalibration logic is checked on tables generated from the model itself
(so the right answer is known without a run); one small real run (one size, all four
protocols, ~15 s) needs root and iproute2 and fails with the reason otherwise.
"""

from __future__ import annotations

from dataclasses import replace

import pandas as pd
import pytest

from sslsplit.experiments.link import (
    FIG12_AXIS,
    PROTOCOLS,
    QUICK_SIZES,
    agreement_summary,
    figure12_measured,
    measure_figure12,
    model_latency,
    recalibrate,
    split_warm_latency,
)
from sslsplit.model_latency import AdslTestbed, request_latency
from testbed.linux.linktestbed import check_available


@pytest.fixture
def netns_available() -> None:
    """Fail (never skip) with the one-line reason when namespaces cannot be made here."""
    check_available()


def _runs_from(params: AdslTestbed, sizes: tuple[int, ...]) -> pd.DataFrame:
    """A measurement table whose 'measurements' are the model with ``params``."""
    return pd.DataFrame([{"protocol": p, "size": s, "rep": 0, "kind": "measured",
                          "measured_s": model_latency(p, s, params)}
                         for p in PROTOCOLS for s in sizes])


def test_axis_and_quick_sizes() -> None:
    assert FIG12_AXIS[0] == 100 and FIG12_AXIS[-1] == 2_000_000 and len(FIG12_AXIS) == 12
    assert set(QUICK_SIZES) <= set(FIG12_AXIS) and len(QUICK_SIZES) == 3


def test_warm_splitting_model_skips_the_miss_handler() -> None:
    # a warm proxy sends stubs over the line, so the gap to cold grows with the file
    for size in (10_000, 500_000):
        assert split_warm_latency(size) < request_latency("split_cold", size)
    big, small = 500_000, 10_000
    assert (request_latency("split_cold", big) - split_warm_latency(big)
            > request_latency("split_cold", small) - split_warm_latency(small))
    # 500 kB through a warm proxy costs less than one second of the 160 kbit/s line
    assert split_warm_latency(big) < 1.0 < request_latency("https", big)


def test_figure_table_sets_model_and_paper_beside_measurement() -> None:
    runs = _runs_from(AdslTestbed(), QUICK_SIZES)
    runs["measured_s"] *= 1.25  # a line 25 % slower than the model says
    fig = figure12_measured(runs=runs)
    assert len(fig) == len(PROTOCOLS) * len(QUICK_SIZES)
    assert fig.model_over_measured.to_numpy() == pytest.approx(0.8)
    https = fig[fig.protocol == "https"]
    assert (https.measured_vs_https == 1).all() and (https.model_vs_https == 1).all()
    cold = fig[fig.protocol == "split_cold"].set_index("size")
    assert cold.loc[min(QUICK_SIZES), "paper_vs_https"] == 0.9
    assert cold.loc[max(QUICK_SIZES), "paper_vs_https"] == 1.1
    assert cold.paper_vs_https.isna().sum() == 1
    assert list(fig[fig.protocol == "http"].half) == ["calibration", "held-out", "calibration"]


def test_recalibration_recovers_the_parameters_from_the_calibration_half_only() -> None:
    truth = replace(AdslTestbed(), rsa_seconds=0.060, proxy_seconds=0.005)
    fig = figure12_measured(runs=_runs_from(truth, QUICK_SIZES))
    # spoil the held-out points: the fit must not see them
    held = fig.half == "held-out"
    fig.loc[held, "measured_s"] *= 3
    best, out = recalibrate(fig)
    assert best == {"rsa_seconds": 0.060, "proxy_seconds": 0.005}
    cal = out[~held]
    assert cal.fit_over_measured.to_numpy() == pytest.approx(1.0)
    summary = agreement_summary(out).set_index("half")
    assert summary.loc["calibration", "after_mean_abs_error"] == pytest.approx(0, abs=1e-9)
    assert summary.loc["calibration", "before_mean_abs_error"] > 0.01


def test_unknown_protocol_is_refused() -> None:
    with pytest.raises(ValueError, match="protocols"):
        measure_figure12(protocols=["ftp"])
    with pytest.raises(ValueError, match="split_cold"):
        measure_figure12(protocols=["split_warm"])


@pytest.mark.usefixtures("netns_available")
@pytest.mark.interop
def test_one_size_measured_through_the_real_proxy() -> None:
    size = FIG12_AXIS[4]  # 3.7 kB: a handful of round trips on the 160 kbit/s line
    runs = measure_figure12(sizes=[size])
    assert list(runs.protocol) == list(PROTOCOLS) and (runs.kind == "measured").all()
    t = runs.set_index("protocol").measured_s
    # the warm proxy serves the payload from its cache: faster than fetching it cold
    assert t["split_warm"] < t["split_cold"]
    # TLS adds round trips over the line that plain HTTP does not pay
    assert t["https"] > t["http"]
    fig = figure12_measured(runs=runs)
    direct = fig[fig.protocol.isin(["http", "https", "split_cold"])]
    assert direct.model_over_measured.between(0.6, 1.6).all(), fig.to_string()
