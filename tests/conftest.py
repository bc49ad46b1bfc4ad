"""Fixtures shared by every test package: credentials for TLS servers, the bundled traces.

pytest offers these to every test under ``tests/`` (a package's own ``conftest.py`` may
override one by defining the same name).  They are session-scoped because they are
expensive and immutable: an RSA key takes tens of milliseconds to make, a trace seconds
to parse.  Helpers that are plain functions rather than fixtures (the in-memory pipe,
seeded RNGs) live in :mod:`tls12.testing` so benchmarks and notebooks can use them too.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from netsim.logparse import ParseReport, read_log
from testbed.traces.catalogue import bundled_dir
from testbed.traces.workload import preprocess
from tls12.certs import Credentials, write_credentials
from tls12.testing import credentials as make_credentials

TRACES = bundled_dir()
"""The sample access logs shipped with :mod:`testbed.traces` (``testbed/traces/bundled/``)."""
EPA = TRACES / "EPA-HTTP" / "epa-http.txt.gz"
WC98 = TRACES / "WorldCup98-day6-sample" / "wc_day6_1_sample.csv.gz"


# --- TLS credentials ---------------------------------------------------------------------


@pytest.fixture(scope="session")
def credentials() -> Credentials:
    """A self-signed RSA-2048 certificate for localhost / 127.0.0.1 (from :mod:`tls12.testing`)."""
    return make_credentials()


@pytest.fixture(scope="session")
def cert_files(
    tmp_path_factory: pytest.TempPathFactory, credentials: Credentials
) -> tuple[Path, Path]:
    """The credentials as PEM files ``(cert, key)`` for openssl, nginx and the command lines."""
    d = tmp_path_factory.mktemp("pem")
    cert, key = d / "cert.pem", d / "key.pem"
    write_credentials(credentials, cert, key)
    return cert, key


# --- bundled traces ----------------------------------------------------------------------


@pytest.fixture(scope="session")
def epa_table() -> tuple[pd.DataFrame, ParseReport]:
    """The EPA-HTTP sample log, parsed: the table and the parse report."""
    return read_log(EPA, "epa")


@pytest.fixture(scope="session")
def epa_work(epa_table: tuple[pd.DataFrame, ParseReport]) -> pd.DataFrame:
    """The EPA-HTTP table after :func:`testbed.traces.workload.preprocess` (what the replays consume)."""
    return preprocess(epa_table[0])


@pytest.fixture(scope="session")
def wc98_table() -> tuple[pd.DataFrame, ParseReport]:
    """The WorldCup98 day-6 sample, parsed."""
    return read_log(WC98)
