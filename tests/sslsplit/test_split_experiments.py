"""The experiment functions on small inputs: real runs, relations the paper's figures rest on."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from sslsplit import experiments as ex


@pytest.fixture(scope="module")
def sweep() -> pd.DataFrame:
    return ex.single_file_sweep(sizes=[100, 3_000, 20_000, 300_000, 1 << 20])


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


def test_calibrated_model_and_wire_params(sweep: pd.DataFrame) -> None:
    model = ex.calibrated_model(sweep)
    hit = model.costs[ex.Protocol.SPLIT_HIT]
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
