"""The wait after a fault counted from when the client could take a byte.

A client whose receive window is closed at a kill gets its next byte only once it has read
and opened the window again, whatever the cluster does. The campaign's analysis records that
opening (``opened_s``) and the *wait*: the gap less the opening, the cluster's part of it.
Pure (no namespaces): hand-made capture rows as ``record_frames`` writes them (a client row's
sequence column holds its acknowledgement, its sixth its scaled window).
"""

from __future__ import annotations

import pandas as pd
import pytest

from sslacc_sim.aio.linux.loadstats import CLIENT, campaign_summary, flows_at, gaps_by, waits
from sslacc_sim.aio.linux.sniff import ACK, SYN

A, B = "aa", "bb"


def _rows() -> list[tuple[object, ...]]:
    return [
        # 1: 1000 bytes in, the client's window closed at 0.5 s; it reads at 1.3 s, and the
        #    new owner's next byte follows 20 ms later
        (0.0, A, 1, 100, 0, SYN | ACK, 0, 1), (0.1, A, 1, 101, 1000, ACK, 0, 1),
        (0.5, CLIENT, 1, 1101, 0, ACK, 0, 1),
        (1.3, CLIENT, 1, 1101, 0, ACK, 65536, 1), (1.32, B, 1, 1101, 1000, ACK, 0, 1),
        # 2: the window open at the kill: the wait is the gap
        (0.0, A, 2, 100, 0, SYN | ACK, 0, 1), (0.1, A, 2, 101, 1000, ACK, 0, 1),
        (0.5, CLIENT, 2, 1101, 0, ACK, 65536, 1), (1.04, B, 2, 1101, 1000, ACK, 0, 1),
        # 3: closed, opened 50 ms after the kill, the next byte 150 ms after that
        (0.0, A, 3, 100, 0, SYN | ACK, 0, 1), (0.1, A, 3, 101, 1000, ACK, 0, 1),
        (0.5, CLIENT, 3, 1101, 0, ACK, 0, 1),
        (1.02, CLIENT, 3, 1101, 0, ACK, 0, 1),  # a zero-window answer: still closed
        (1.05, CLIENT, 3, 1101, 0, ACK, 8192, 1), (1.2, B, 3, 1101, 1000, ACK, 0, 1),
        # 4: closed, and the next byte (an acknowledgement of an upload) came before it opened
        (0.0, A, 4, 100, 0, SYN | ACK, 0, 501), (0.1, A, 4, 101, 1000, ACK, 0, 501),
        (0.5, CLIENT, 4, 1101, 0, ACK, 0, 501), (0.9, A, 4, 1101, 0, ACK, 0, 901),
        (1.1, B, 4, 1101, 0, ACK, 0, 1501), (1.4, CLIENT, 4, 1101, 0, ACK, 4096, 1501),
    ]  # fmt: skip


def _flows() -> pd.DataFrame:
    at = flows_at(_rows(), 1.0, A)
    return pd.DataFrame([{"trial": 1, "mode": "kill", **vars(f)} for f in at.values()])


def test_a_closed_window_s_opening_is_found_and_an_open_one_has_none() -> None:
    at = flows_at(_rows(), 1.0, A)
    assert at[1].room == 0 and at[1].opened_s == pytest.approx(0.3)
    assert at[1].gap_s == pytest.approx(0.32)
    assert at[2].room and at[2].room > 0 and at[2].opened_s is None
    assert at[3].opened_s == pytest.approx(0.05)  # not the zero-window answer at 1.02
    assert at[4].gap_s == pytest.approx(0.1) and at[4].opened_s == pytest.approx(0.4)


def test_the_wait_is_the_gap_less_the_opening_and_never_more_than_the_gap() -> None:
    flows = _flows().set_index("port")
    wait = waits(flows)
    assert wait[1] == pytest.approx(0.02)
    assert wait[2] == pytest.approx(0.04)
    assert wait[3] == pytest.approx(0.15)
    assert wait[4] == pytest.approx(0.1)  # it came before the opening: the gap
    assert waits(flows.drop(columns="opened_s")).tolist() == flows["gap_s"].tolist()
    # a run where no window was closed: the column holds only None (an object column)
    none = pd.DataFrame({"gap_s": [0.01, None], "opened_s": [None, None]})
    assert waits(none).iloc[0] == pytest.approx(0.01) and pd.isna(waits(none).iloc[1])


def test_the_summary_gives_the_waits_after_kills_by_window() -> None:
    flows = _flows()
    trials = pd.DataFrame([{"trial": 1, "mode": "kill", "failed": 0, "took_over": True,
                            "zombie_frames": 0, "detect_s": 0.01}])  # fmt: skip
    conns = pd.DataFrame([{"trial": 1, "mode": "kill", "ok": True, "silently_wrong": False,
                           "upload": False, "repeat": 1, "resume": False, "resumed": None}])
    s = campaign_summary({"modes": ["kill"]}, trials, conns, flows)
    assert s["wait_after_kills"]["n"] == 4
    assert s["wait_after_kills"]["max_s"] == pytest.approx(0.15)
    assert s["gap_max_s"] == pytest.approx(0.32)  # the gaps themselves are unchanged
    closed = s["wait_by_window_after_kills"]["closed"]
    assert closed["n"] == 3 and closed["max_s"] == pytest.approx(0.15)
    assert s["wait_by_window_after_kills"]["open"]["max_s"] == pytest.approx(0.04)
    assert gaps_by(flows, "mode")["kill"]["max_s"] == pytest.approx(0.32)
