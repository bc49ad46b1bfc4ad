"""SINE Figures 4-6 measured over the kernel links (sine.experiments.link).

Recalibration is checked on tables generated from the model (the right parameters are known);
one small real run -- the origin, a real Squid and the verifying client over the 4 Mbit/s SINE
profile, ~15 s -- needs root and iproute2 and fails with the reason otherwise.
"""

from __future__ import annotations

from dataclasses import replace

import pandas as pd
import pytest

from sine.aio.runner import main
from sine.experiments.link import (
    MEASURED_PROTOCOLS,
    agreement_summary,
    figure5_measured,
    paper_ratios,
    recalibrate,
)
from sine.model_latency import PROTOCOLS, Costs, Scenario, fetch_latency, portal_latency
from testbed.linux.linktestbed import check_available

COSTS = Costs()  # the model's defaults: these tests check the plumbing, not this machine


@pytest.fixture
def netns_available() -> None:
    """Fail (never skip) with the one-line reason when namespaces cannot be made here."""
    check_available()


def _fig5_from(sc: Scenario, overhead: float,
               protocols: tuple[str, ...] = ("http-proxy", "https", "sine")) -> pd.DataFrame:
    rows = []
    for p in protocols:
        for i, kbps in enumerate((512.0, 1000.0, 4000.0)):
            model = fetch_latency(p, 100_000, replace(sc, client_bw=kbps * 1e3))
            # the origin's overhead: a fetch Squid serves warm does not reach the origin, but
            # SINEB's AT_sign request always does
            extra = 0.0 if p.endswith("-proxy") and not p.startswith("sineb") else overhead
            rows.append({"protocol": p, "client_kbps": kbps, "measured_s": model + extra,
                         "latency_model_s": fetch_latency(
                             p, 100_000, Scenario(client_bw=kbps * 1e3, costs=COSTS)),
                         "relay_limited": False,
                         "half": "calibration" if i % 2 == 0 else "held-out"})
    df = pd.DataFrame(rows)
    df["model_over_measured"] = df.latency_model_s / df.measured_s
    return df


def test_recalibration_recovers_wan_delay_and_overhead() -> None:
    truth = Scenario(costs=COSTS, wan_delay=0.045)
    fig = _fig5_from(truth, overhead=0.020)
    held = fig.half == "held-out"
    fig.loc[held, "measured_s"] *= 2  # the fit must not look at these
    best, out = recalibrate(fig, costs=COSTS)
    assert best == {"wan_delay": 0.045, "overhead": 0.020, "init_cwnd": 2.0}
    assert out[~held].fit_over_measured.to_numpy() == pytest.approx(1.0)
    summary = agreement_summary(out).set_index("half")
    assert summary.loc["calibration", "after_mean_abs_error"] == pytest.approx(0, abs=1e-9)


def test_recalibration_charges_the_origin_overhead_to_warm_sineb() -> None:
    truth = Scenario(costs=COSTS, wan_delay=0.055)
    fig = _fig5_from(truth, overhead=0.040, protocols=("http-proxy", "sineb-proxy", "sinex-proxy"))
    best, out = recalibrate(fig, costs=COSTS)
    assert best == {"wan_delay": 0.055, "overhead": 0.040, "init_cwnd": 2.0}
    assert out.fit_over_measured.to_numpy() == pytest.approx(1.0)


def test_every_modelled_protocol_is_measured() -> None:
    assert set(MEASURED_PROTOCOLS) == set(PROTOCOLS)


def test_recalibration_finds_linux_initial_window() -> None:
    truth = Scenario(costs=COSTS, tcp=replace(Scenario().tcp, init_cwnd=10.0))
    best, _ = recalibrate(_fig5_from(truth, overhead=0.0), costs=COSTS)
    assert best == {"wan_delay": 0.050, "overhead": 0.0, "init_cwnd": 10.0}


def test_relay_limited_rows_are_left_out_of_the_fit() -> None:
    fig = _fig5_from(Scenario(costs=COSTS), 0.0)
    fig["relay_limited"] = True
    with pytest.raises(ValueError, match="relay-limited"):
        recalibrate(fig, costs=COSTS)


def test_paper_ratios_use_the_largest_size_and_the_warm_portal() -> None:
    sc = Scenario(costs=COSTS)
    fig4 = pd.DataFrame([{"protocol": p, "size_bytes": s, "measured_s": 2 * fetch_latency(
        p, s, sc), "latency_model_s": fetch_latency(p, s, sc)}
        for p in ("https", "sinex-proxy") for s in (10_000, 1_000_000)])
    fig6 = pd.DataFrame([{"protocol": p, "cache": c, "measured_s": portal_latency(
        p, 22, 15_000, sc, c != "cold"), "latency_model_s": portal_latency(
        p, 22, 15_000, sc, c != "cold")} for p, c in (("https", "none"),
                                                     ("sinex-proxy", "warm"))])
    r = paper_ratios(fig4, fig6).set_index(["claim", "kind"]).ours
    expected = fetch_latency("https", 1_000_000, sc) / fetch_latency("sinex-proxy", 1_000_000, sc)
    assert r[("fig4_sinex_proxy_over_https_large", "measured")] == pytest.approx(expected)
    assert r[("fig6_https_over_sinex_proxy_warm", "modelled")] > 1


def test_run_plan_command_line_usage(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:  # argparse: a usage error is status 2
        main([])
    assert exc.value.code == 2 and "run-plan" in capsys.readouterr().err


@pytest.mark.usefixtures("netns_available")
@pytest.mark.interop
def test_figure5_point_through_real_squid() -> None:
    protocols = ("http-proxy", "sine", "sineb-proxy", "sinex-proxy")
    fig = figure5_measured(costs=COSTS, bandwidths=(4e6,), protocols=protocols)
    t = fig.set_index("protocol").measured_s
    # from the warm Squid: no WAN round trips, so faster than SINE straight from the origin
    assert t["sinex-proxy"] < t["sine"] and t["http-proxy"] < t["sine"]
    # SINEB from the warm Squid: its AT_sign request crosses the WAN (a 100 ms round trip) over
    # the TLS connection opened before the clock -- not the three round trips of connect and
    # handshake as well
    assert t["sinex-proxy"] + 0.08 < t["sineb-proxy"] < t["sinex-proxy"] + 0.25
    assert fig.model_over_measured.between(0.5, 2.0).all(), fig.to_string()
    assert not fig.relay_limited.any()
