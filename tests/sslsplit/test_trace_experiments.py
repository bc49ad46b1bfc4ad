"""Experiments on small inputs: shapes, invariants, agreement with the paper where it applies."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pandas as pd
import pytest

from sslsplit import experiments as sx
from sslsplit.experiments import traces as ex
from sslsplit.synth import LCS_LIKE, generate, scaled
from testbed.traces.stats import compressibility


@pytest.fixture(scope="module")
def works(epa_work: pd.DataFrame) -> dict[str, pd.DataFrame]:
    synth = generate(replace(scaled(LCS_LIKE, 0.03), days=40.0))
    return {"EPA-HTTP": epa_work, ex.SYNTHETIC: synth}


def test_fig10_11_invariants(works: dict[str, pd.DataFrame]) -> None:
    df = sx.figure10_11(quick=True, workloads=works, measured=False)
    assert set(df["scope"]) == {"chunk", "full"}
    for (trace, scope), g in df.groupby(["trace", "scope"]):
        r = g.set_index("protocol")["ratio"]
        assert r["https"] > r["http"] > 1.0
        assert r["split_warm"] <= r["split_cold"] <= 1.1 * r["https"]
        w = works[trace] if scope == "full" else ex.chunk_of(trace, works[trace])
        assert r["ideal"] == pytest.approx(1 / compressibility(w))
        if scope == "chunk":
            assert g["file_bytes"].iloc[0] >= 10e6
    epa_full = df[(df.trace == "EPA-HTTP") & (df.scope == "full")].set_index("protocol")
    assert epa_full.loc["split_cold", "vs_http"] < 0.8       # splitting saves on EPA-HTTP
    # every number says what it is: the ideal is a trace statistic, tuned on the synthetic trace
    ideal = df[df.protocol == "ideal"].set_index("trace")["kind"]
    assert set(ideal[ex.SYNTHETIC]) == {ex.BY_CONSTRUCTION}
    assert set(ideal["EPA-HTTP"]) == {ex.MEASURED}
    assert set(df.loc[df.protocol != "ideal", "kind"]) == {ex.MODELLED}
    assert df.loc[(df.protocol == "ideal") & (df.trace == ex.SYNTHETIC), "note"].str.contains(
        "closest to the paper's 2.26").any()


def test_fig9_and_tables(works: dict[str, pd.DataFrame]) -> None:
    cdf = ex.fig9_size_cdf(quick=True, workloads=works)
    for _, g in cdf.groupby(["trace", "scope"]):
        assert g["cdf"].is_monotonic_increasing and g["cdf"].iloc[-1] == 1.0
    tab = ex.trace_table(quick=True, workloads=works).set_index("trace")
    assert tab.loc["EPA-HTTP", "requests"] == 35_291
    assert tab.loc["EPA-HTTP", "compressibility"] == pytest.approx(2.293, abs=1e-3)
    assert tab.loc[ex.SYNTHETIC, "chunk_compressibility"] == pytest.approx(
        ex.LCS_CHUNK_COMPRESSIBILITY, rel=0.3)
    # ... which is so because the chunk was picked for it, and the table says so
    assert tab.loc[ex.SYNTHETIC, "kind"] == ex.BY_CONSTRUCTION
    assert "closest" in tab.loc[ex.SYNTHETIC, "note"]
    assert tab.loc["EPA-HTTP", "kind"] == ex.MEASURED
    rep = ex.repetition(quick=True, workloads=works)
    assert set(rep["trace"]) == set(works)
    kinds = rep.groupby("trace")["kind"].agg(set)
    assert kinds[ex.SYNTHETIC] == {ex.BY_CONSTRUCTION} and kinds["EPA-HTTP"] == {ex.MEASURED}


def test_two_weeks_warmth(works: dict[str, pd.DataFrame]) -> None:
    df = ex.two_weeks_warmth(quick=True, workloads=works)
    assert set(df["trace"]) == {ex.SYNTHETIC}        # EPA-HTTP has no day of history
    assert df["history_days"].max() == 14.0
    assert ((df["warm_bytes"] >= 0) & (df["warm_bytes"] <= 1)).all()
    assert (df["split_preload_vs_http"] <= df["split_cold_vs_http"] + 1e-12).all()
    assert (df["split_warm_vs_http"] <= df["split_preload_vs_http"] + 1e-12).all()
    assert set(df["kind"]) == {ex.MODELLED}          # synthetic, not tuned to the paper's 90 %


def test_fig7_and_fig12_from_the_models_alone() -> None:
    eff = sx.figure7(quick=True, measured=False)
    assert set(eff["kind"]) == {ex.MODELLED}
    rel = np.abs(eff["efficiency"] / eff["wire_efficiency"] - 1)
    # internal consistency, not validation (the linear model is fitted to the structural one);
    # the paper model swaps in the published 1/250 and 1/120 cached-split marginals, so only
    # the other protocols must track the structural model within 5 %
    assert rel[eff.protocol != "split_hit"].max() < 0.05
    hit = eff[eff.protocol == "split_hit"]
    assert (hit["efficiency"] <= hit["wire_efficiency"] * 1.05).all()
    lat = sx.figure12(quick=True, measured=False, sizes=[100, 100_000])
    assert len(lat) == 6 and (lat["latency_s"] > 0).all()
    assert lat.loc[lat.protocol == "https", "vs_https"].eq(1.0).all()
    assert set(lat["kind"]) == {ex.MODELLED}


def test_trace_note() -> None:
    assert "2.26" in ex.trace_note(ex.SYNTHETIC, "chunk")
    assert "1.37" in ex.trace_note(ex.SYNTHETIC_AMSTERDAM, "both")
    assert ex.trace_note("EPA-HTTP", "full") == "public log"
    assert ex.trace_kind("EPA-HTTP") == ex.MEASURED
    with pytest.raises(ValueError):
        ex.trace_note(ex.SYNTHETIC, "day")


def test_available_traces_and_metadata() -> None:
    names = ex.available_traces()
    assert "EPA-HTTP" in names and "WorldCup98-day6-sample" in names
    assert "SDSC-HTTP" not in names                    # no sizes
    config = ex.run_config()
    assert config["traces"] == names and isinstance(config["traces_dir"], bool)


def test_model_only_views_refuse_a_measured_sweep() -> None:
    sweep = pd.DataFrame({"size": [100], "protocol": ["http"], "server_bytes": [300]})
    with pytest.raises(ValueError, match="measured=True"):
        sx.figure7(sweep=sweep, measured=False)
    with pytest.raises(ValueError, match="measured=True"):
        sx.figure10_11(sweep=sweep, workloads={}, measured=False)
    with pytest.raises(ValueError, match="measured=True"):
        sx.figure12(sweep=sweep, measured=False, sizes=[100])


def test_model_view_of_figures_10_11_honours_the_chunk_volume(
    works: dict[str, pd.DataFrame]
) -> None:
    small = sx.figure10_11(workloads=works, chunk_bytes=1_000_000, measured=False)
    chunk = small[small["scope"] == "chunk"].groupby("trace")["file_bytes"].first()
    for trace, w in works.items():
        assert chunk[trace] == ex.chunk_of(trace, w, 1_000_000)["size"].sum()
        assert chunk[trace] < 2_000_000
