"""Statistics on the bundled traces, checked against each trace's SOURCE.md by hand."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from testbed.traces.stats import (
    StatsAccumulator,
    compressibility,
    percentiles,
    repetition_vs_window,
    size_cdf,
    trace_stats,
    unique_bytes,
)
from testbed.traces.workload import preprocess


def test_epa_matches_source_md(epa_table: tuple, epa_work: pd.DataFrame) -> None:
    table, rep = epa_table
    st = trace_stats(table, epa_work, rep.lines, rep.malformed)
    assert (st.lines, st.parsed, st.malformed) == (47_748, 47_748, 0)
    assert st.methods[:3] == [("GET", 46_020), ("POST", 1_622), ("HEAD", 106)]
    assert st.statuses[0] == ("200", 36_712)
    assert st.get200 == 35_291
    assert st.bytes_transferred == 290_822_906
    assert st.unique_urls == 5_038
    assert st.unique_objects == 5_340
    assert st.unique_bytes == 126_851_539
    assert st.redundancy == pytest.approx(2.293, abs=5e-4)
    assert st.size_percentiles == [169, 1726, 8107, 84023, 4816896]
    assert st.first == pd.Timestamp("1995-08-29 23:53:25")
    assert st.days_with_requests == 2


def test_worldcup_sample_matches_source_md(wc98_table: tuple) -> None:
    table, rep = wc98_table
    st = trace_stats(table, preprocess(table), rep.lines, rep.malformed)
    assert st.get200 == 173_924
    assert st.bytes_transferred == 1_468_218_073
    assert st.unique_objects == 3_054 and st.unique_urls == 2_542
    assert st.unique_bytes == 59_805_949
    assert st.redundancy == pytest.approx(24.55, abs=5e-3)
    assert ("-", 3) in st.statuses


def test_hand_computed_compressibility() -> None:
    # objects: 0 (100 B) ×3, 1 (50 B) ×1, 2 (10 B) ×2 → 370 B transferred, 160 B unique
    work = pd.DataFrame({"time": np.arange(6), "url": [0, 0, 1, 0, 2, 2],
                         "size": [100, 100, 50, 100, 10, 10], "obj": [0, 0, 1, 0, 2, 2]})
    assert unique_bytes(work) == 160
    assert compressibility(work) == pytest.approx(370 / 160)


def test_percentiles_and_cdf() -> None:
    sizes = np.arange(1, 101)
    assert percentiles(sizes) == [10, 50, 90, 99, 100]
    cdf = size_cdf(sizes, points=50)
    assert cdf["cdf"].is_monotonic_increasing
    assert cdf["cdf"].iloc[-1] == 1.0
    at10 = cdf.loc[cdf["size"] <= 10, "cdf"].iloc[-1]
    assert at10 == pytest.approx(0.10, abs=0.011)


def test_repetition_whole_trace_equals_compressibility(epa_work: pd.DataFrame) -> None:
    r = repetition_vs_window(epa_work, (1 / 24, 10_000), samples=4, seed=3)
    whole = r[r["window_days"] > 0.9]
    assert len(whole) == 1
    assert whole["compressibility"].iloc[0] == pytest.approx(compressibility(epa_work))
    hours = r[r["window_days"] < 0.1]
    assert len(hours) == 4 and (hours["compressibility"] >= 1).all()
    again = repetition_vs_window(epa_work, (1 / 24, 10_000), samples=4, seed=3)
    pd.testing.assert_frame_equal(r, again)


def test_streaming_stats_equal_whole_table(epa_table: tuple, epa_work: pd.DataFrame) -> None:
    from netsim.logparse import iter_log
    from testbed.traces.catalogue import bundled_dir, stats_for_paths

    table, rep = epa_table
    whole = trace_stats(table, epa_work, rep.lines, rep.malformed)
    acc = StatsAccumulator()
    for chunk in iter_log(bundled_dir() / "EPA-HTTP" / "epa-http.txt.gz", "epa",
                          chunk_lines=7_000):
        acc.add(chunk)
    assert acc.result(rep.lines, rep.malformed) == whole
    streamed = stats_for_paths([bundled_dir() / "EPA-HTTP" / "epa-http.txt.gz"], "epa", 9_999)
    assert streamed == whole
