"""Shared fixtures: the bundled traces, parsed once per test session."""

from __future__ import annotations

import pandas as pd
import pytest

from netsim.logparse import ParseReport, read_log
from netsim.traces import bundled_dir
from netsim.workload import preprocess

TRACES = bundled_dir()
EPA = TRACES / "EPA-HTTP" / "epa-http.txt.gz"
WC98 = TRACES / "WorldCup98-day6-sample" / "wc_day6_1_sample.csv.gz"
SDSC = TRACES / "SDSC-HTTP" / "sdsc-http.txt.gz"


@pytest.fixture(scope="session")
def epa_table() -> tuple[pd.DataFrame, ParseReport]:
    return read_log(EPA, "epa")


@pytest.fixture(scope="session")
def epa_work(epa_table: tuple[pd.DataFrame, ParseReport]) -> pd.DataFrame:
    return preprocess(epa_table[0])


@pytest.fixture(scope="session")
def wc98_table() -> tuple[pd.DataFrame, ParseReport]:
    return read_log(WC98)
