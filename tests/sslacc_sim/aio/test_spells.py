"""Zero-window spells on hand-made client segments (:mod:`sslacc_sim.aio.linux.spells`).

The tool that tells whether a closed-window connection's wait after a kill is the client's:
a spell opens at a client segment with window 0 and ends at the same client's next segment
that opens it; spells are split by when they began, relative to the fault. The reader of
real captures (``tshark``) is exercised on the join campaign's captures
(``test_campaign_buckets.py``).
"""

from __future__ import annotations

import pandas as pd
import pytest
from hypothesis import given
from hypothesis import strategies as st

from sslacc_sim.aio.linux.spells import spell_summary, zero_window_spells


def _segments(rows: list[tuple[float, int, int]]) -> pd.DataFrame:
    return pd.DataFrame(rows, columns=["t", "port", "window"])


def test_a_spell_runs_from_a_closed_window_to_the_clients_next_opening() -> None:
    spells = zero_window_spells(_segments([
        (-1.0, 1, 0), (-0.99, 1, 0), (-0.9, 1, 4096),  # one spell of 0.1 s (a repeated 0)
        (-0.5, 2, 8192), (0.01, 2, 0), (0.21, 2, 65536),  # 0.2 s, begun after the fault
        (0.05, 3, 0), (0.06, 3, -1),  # an unknown window ends nothing
        (0.4, 3, 0),  # still closed when the capture ends: left out
    ]))
    assert spells["port"].tolist() == [1, 2]
    assert spells["start"].tolist() == [-1.0, 0.01]
    assert spells["length"].round(6).tolist() == [0.1, 0.2]


def test_the_summary_splits_spells_by_when_they_began() -> None:
    spells = pd.DataFrame({"port": [1, 2, 3, 4], "start": [-2.0, -0.06, -0.05, 0.29],
                           "length": [0.1, 0.3, 0.2, 0.4]})  # fmt: skip
    summary = spell_summary(spells)
    assert summary["before"]["n"] == 2 and summary["before"]["max_s"] == pytest.approx(0.3)
    assert summary["around"]["n"] == 2 and summary["around"]["p50_s"] == pytest.approx(0.3)
    assert spell_summary(spells.iloc[:0]) == {"before": {"n": 0}, "around": {"n": 0}}


@given(st.lists(st.tuples(st.integers(1, 3), st.sampled_from([-1, 0, 0, 1024])), max_size=40))
def test_spells_never_overlap_per_client_and_never_run_backwards(
        rows: list[tuple[int, int]]) -> None:  # fmt: skip
    segments = _segments([(i * 0.01, port, window) for i, (port, window) in enumerate(rows)])
    spells = zero_window_spells(segments)
    assert (spells["length"] > 0).all()
    for _, one in spells.groupby("port"):
        ends = (one["start"] + one["length"]).tolist()
        assert all(end <= nxt for end, nxt in zip(ends, one["start"].tolist()[1:], strict=False))
    opened = sum(1 for port, window in rows if window == 0)
    assert len(spells) <= opened
