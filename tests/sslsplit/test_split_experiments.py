"""The experiment functions on small inputs: real runs, relations the paper's figures rest on,
the calibrated cost model tested on replays it was not fitted to, and the paper comparison."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pandas as pd
import pytest

from sslsplit import experiments as ex
from sslsplit.costmodel import Protocol, paper_model
from sslsplit.experiments import traces as nex
from sslsplit.paper_points import PAPER_POINTS, SOURCES, paper_bandwidth
from sslsplit.replay import replay
from sslsplit.synth import AMSTERDAM_LIKE, LCS_LIKE, generate, scaled

KINDS = {"measured", "modelled", "true by construction"}


@pytest.fixture(scope="module")
def sweep() -> pd.DataFrame:
    return ex.single_file_sweep(sizes=[100, 3_000, 20_000, 300_000, 1 << 20])


@pytest.fixture(scope="module")
def calibration() -> pd.DataFrame:
    """The sweep the notebook calibrates on in quick runs (includes the paper's 100 B and 1 MB)."""
    return ex.single_file_sweep(quick=True)


def test_sweep_relations(sweep: pd.DataFrame) -> None:
    b = sweep.pivot(index="size", columns="protocol", values="server_bytes")
    assert (b["http"] < b["https"]).all()
    # large files: a cold proxy costs the origin stubs *and* payloads, a little more than HTTPS;
    # tiny files: less, because the proxy already holds the certificate
    assert b.loc[1 << 20, "https"] < b.loc[1 << 20, "split_cold"] < 1.02 * b.loc[1 << 20, "https"]
    assert b.loc[100, "split_cold"] < b.loc[100, "https"]
    assert (b["http"] > b.index).all()  # headers on top of the body
    assert b.loc[1 << 20, "split_warm"] < 0.01 * b.loc[1 << 20, "split_cold"]
    # warm cost grows by one stub (~60-70 B) per 16 KiB record
    per_record = (b.loc[1 << 20, "split_warm"] - b.loc[300_000, "split_warm"]) / (64 - 19)
    assert 40 < per_record < 100


def test_figures_7_and_8(sweep: pd.DataFrame) -> None:
    f7 = ex.figure7(sweep=sweep)
    assert {"efficiency", "paper_model_efficiency"} <= set(f7.columns)
    assert (f7["efficiency"] > 0).all() and (f7[f7.protocol != "split_warm"]["efficiency"] < 1).all()
    f8 = ex.figure8(sweep=sweep)
    big = f8[f8["size"] == 1 << 20].iloc[0]
    assert big["vs_http"] > 100 and big["vs_https"] > big["vs_http"]


def test_figure12_measured_view_adds_measured_messages_to_the_model_view(sweep: pd.DataFrame) -> None:
    sizes = [100, 100_000]
    both = ex.figure12(sweep=sweep, sizes=sizes)
    alone = ex.figure12(measured=False, sizes=sizes)
    assert list(both["messages"].unique()) == ["measured", "paper setup"]
    paper = both[both["messages"] == "paper setup"].drop(columns="messages").reset_index(drop=True)
    pd.testing.assert_frame_equal(paper, alone)
    ours = both[both["messages"] == "measured"]
    # our servers' message sizes are not Apache's, so the measured curves move
    assert not np.allclose(ours["latency_s"].to_numpy(), alone["latency_s"].to_numpy())


def test_calibrated_model_and_wire_params(sweep: pd.DataFrame) -> None:
    model = ex.calibrated_model(sweep)
    hit = model.costs[Protocol.SPLIT_HIT]
    assert hit.marginal[-1] < 0.01  # the paper's "approximately 1/250" regime
    sizes = np.array(sorted(sweep["size"].unique()))
    measured = sweep[sweep.protocol == "https"].sort_values("size")["wire_bytes"].to_numpy()
    assert np.allclose(model.bytes("https", sizes), measured, rtol=0.05)
    wire = ex.measured_wire_params(sweep)
    assert wire.http_header == sweep[(sweep.protocol == "http") & (sweep["size"] == 100)]["server_bytes"].iloc[0] - 100
    assert 30 < wire.record_overhead < 80 and 40 < wire.stub_overhead < 100


def test_ip_bytes() -> None:
    assert ex.ip_bytes(0) == 4 * 52
    assert ex.ip_bytes(1448) == 1448 + 52 + 4 * 52
    assert ex.ip_bytes(1449) == 1449 + 2 * 52 + 4 * 52


def test_replay_chunk_through_real_servers() -> None:
    chunk = pd.DataFrame({"obj": [1, 2, 1, 3, 2, 1], "size": [50_000, 20_000, 50_000, 700, 20_000, 50_000]})
    df = ex.replay_chunk(chunk).set_index("protocol")
    assert df.loc["http", "file_bytes"] == chunk["size"].sum()
    assert df.loc["split_warm", "server_bytes"] < 0.1 * df.loc["http", "server_bytes"]
    # cold: repeats hit the proxy, so about one copy of each object (70.7 kB) leaves the origin
    assert df.loc["split_cold", "server_bytes"] < 0.5 * df.loc["https", "server_bytes"]
    assert df.loc["split_cold", "server_bytes"] > 70_700


def test_calibrated_model_predicts_held_out_replay(calibration: pd.DataFrame) -> None:
    """The README's claim: the model calibrated on single-file downloads predicts the bytes of
    trace replays through the real servers and proxy that played no part in the calibration.

    Measured on 24 synthetic chunks (seeds 31-36, both shapes, 17-150 requests): HTTP within
    0.05 %, HTTPS 0.2 %, cold splitting 0.3 %, warm splitting 1.6 %. Warm splitting is the
    loosest because its true cost is a step (one stub per 16 KiB record) that the paper's model
    draws as a line; hence 2 % for it here and 1 % for the others.
    """
    chunks = [ex.held_out_chunk(shape, 31) for shape in ex.HELD_OUT_SHAPES]
    # held out: sizes the sweep never downloaded, other file bytes, a mix with repeats
    for chunk in chunks:
        assert not set(chunk["size"]) & set(calibration["size"])
        assert chunk["size"].max() > 16_384 and chunk["size"].min() < 4_000
    assert any(chunk["obj"].duplicated().any() for chunk in chunks)
    df = ex.held_out_agreement(calibration, seeds=(31,))
    assert set(df["fit"]) == {"held-out"} and len(df) == 2 * len(ex.calibration.PROTOCOLS)
    worst = df.groupby("protocol")["error"].agg(lambda e: e.abs().max())
    tolerance = {"http": 0.01, "https": 0.01, "split_cold": 0.01, "split_warm": 0.02}
    for protocol, tol in tolerance.items():
        assert worst[protocol] < tol, (protocol, worst[protocol])
    # the test can fail: the model of the paper's Apache setup does not describe our server
    chunk = chunks[0]
    measured = df[(df["shape"] == "www.lcs-like") & (df["protocol"] == "split_warm")]["measured"].iloc[0]
    paper = replay(chunk, paper_model()).set_index("protocol")["server_bytes"]
    assert paper["split_warm"] / measured - 1 > 0.5


def test_sweep_fit_is_in_sample(calibration: pd.DataFrame) -> None:
    fit = ex.sweep_fit(calibration)
    assert set(fit["fit"]) == {"in-sample"} and len(fit) == len(calibration)
    assert np.allclose(fit["error"], fit["model"] / fit["measured"] - 1)
    # the paper's "fits the microbenchmark results to within 5%" holds in-sample here too
    assert fit["error"].abs().max() < 0.05


def test_paper_points_provenance() -> None:
    pts = PAPER_POINTS
    assert set(pts["paper_value_source"]) <= set(SOURCES)  # no value read off a figure
    assert not pts.duplicated(["figure", "x", "paper_trace", "protocol", "quantity"]).any()
    assert pts["paper_ref"].str.startswith("§").all() and pts["paper_ref"].str.contains('"').all()
    assert (np.isfinite(pts["paper_value"]) & (pts["paper_value"] > 0)).all()
    assert set(pts["figure"]) >= {"7", "8", "10", "11", "12"}
    bars = paper_bandwidth()
    assert (bars.loc[bars["protocol"] == "http", "vs_http"] == 1.0).all()
    assert set(bars["paper_trace"]) == {"www.lcs", "amsterdam"}


def test_paper_comparison(calibration: pd.DataFrame) -> None:
    works = {nex.SYNTHETIC: generate(replace(scaled(LCS_LIKE, 0.02), days=20.0, seed=5)),
             nex.SYNTHETIC_AMSTERDAM: generate(replace(scaled(AMSTERDAM_LIKE, 0.02), days=20.0, seed=6))}
    bw = ex.figure10_11(True, calibration, workloads=works, chunk_bytes=600_000)
    assert set(bw["kind"]) == KINDS | {"published"}
    assert set(bw.loc[bw["source"] == "measured", "kind"]) == {"measured"}
    assert set(bw.loc[bw["protocol"] == "ideal", "kind"]) == {"true by construction", "published"}
    held = ex.agreement(bw)
    assert set(held["fit"]) == {"held-out"} and (held["error"].abs() < 0.02).all()

    cmp = ex.paper_comparison(calibration, bw)
    assert set(cmp["kind"]) == KINDS
    assert np.allclose(cmp["model_vs_paper"], cmp["value"] / cmp["paper_value"])
    est = cmp.set_index(["figure", "x", "protocol", "estimate"])
    # every Figure 7, 8, 10 and 11 point has an estimate, each chunk point a measured one
    for pt in PAPER_POINTS[PAPER_POINTS["figure"].isin(["7", "8", "10", "11"])].itertuples():
        have = cmp[(cmp["figure"] == pt.figure) & (cmp["x"] == pt.x) & (cmp["protocol"] == pt.protocol)]
        assert len(have), (pt.figure, pt.x, pt.protocol)
        if pt.scope == "chunk" and pt.protocol != "ideal" or pt.figure == "8":
            assert (have["estimate"] == ex.EST_MEASURED).any()
    # the model-vs-measured ratio exists for the calibrated model only, labelled in- or held-out
    cal = cmp[cmp["estimate"] == ex.EST_CALIBRATED]
    assert cmp.loc[cmp["estimate"] != ex.EST_CALIBRATED, "model_vs_measured"].isna().all()
    assert set(cal.loc[cal["figure"].isin(["7", "8"]), "fit"]) == {"in-sample"}
    chunk_cal = cal[cal["x"] == "chunk"]
    assert set(chunk_cal["fit"]) == {"held-out"}
    assert (chunk_cal["model_vs_measured"] - 1).abs().max() < 0.02
    # what is true by construction says so: the ideal on the picked chunks, the set marginals
    assert set(cmp.loc[cmp["protocol"] == "ideal", "kind"]) == {"true by construction"}
    assert est.loc[("7", "4,000 B to 2^22 B", "split_warm", ex.EST_SETUP), "kind"] == "true by construction"
    # a measured value is a real run: warm splitting of 1 MB saves >99 % over HTTP
    assert est.loc[("8", "1 MB", "split_warm", ex.EST_MEASURED), "value"] > 0.99
    assert est.loc[("8", "100 B", "split_warm", ex.EST_MEASURED), "kind"] == "measured"
