"""The curl demo behind ``make reproduce``: real downloads, a CSV and a plot."""

from __future__ import annotations

import csv
import subprocess
import sys
from pathlib import Path

import pytest

from testbed.apps.demo import format_table, parse_size, run_demo, write_outputs
from tls12.keylog import open_keylog
from tls12.suites import CipherSuite

pytestmark = pytest.mark.interop

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(("text", "value"), [("0", 0), ("4000", 4000), ("16K", 16384), ("1M", 1 << 20), ("2MiB", 2 << 20)])
def test_parse_size(text: str, value: int) -> None:
    assert parse_size(text) == value


def test_demo_downloads_and_writes_outputs(tmp_path: Path) -> None:
    suites = (CipherSuite.TLS_RSA_WITH_NULL_SHA, CipherSuite.TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA256)
    results = run_demo([0, 4000, 1 << 20], suites, show_progress=False)
    assert [(r.suite, r.size_bytes) for r in results] == [
        (s, n) for s in ("NULL-SHA", "ECDHE-RSA-AES128-SHA256") for n in (0, 4000, 1 << 20)
    ]
    assert all(r.sha256_ok for r in results)
    for r in results:
        assert r.server_bytes_out > r.size_bytes  # handshake, headers, MACs
    csv_path, png_path = write_outputs(results, tmp_path)
    with csv_path.open() as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == len(results) and rows[0]["suite"] == "NULL-SHA"
    assert png_path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "ECDHE-RSA-AES128-SHA256" in format_table(results)


def test_demo_cli_help() -> None:
    proc = subprocess.run([sys.executable, "-m", "testbed.demo", "--help"], capture_output=True, text=True, timeout=60, cwd=REPO)
    assert proc.returncode == 0
    assert "--sizes" in proc.stdout and "--out" in proc.stdout and "--keylog" in proc.stdout


def test_demo_server_key_log_is_curls(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The demo's server writes the key-log line curl writes (curl reads ``SSLKEYLOGFILE``)."""
    ours, theirs = tmp_path / "server.keys", tmp_path / "curl.keys"
    monkeypatch.setenv("SSLKEYLOGFILE", str(theirs))
    with open_keylog(ours) as sink:
        results = run_demo([100], (CipherSuite.TLS_RSA_WITH_AES_128_CBC_SHA,), show_progress=False, keylog=sink)
    assert results[0].sha256_ok
    want = b"".join(line for line in theirs.read_bytes().splitlines(keepends=True) if line.startswith(b"CLIENT_RANDOM "))
    assert want.count(b"\n") == 1 and ours.read_bytes() == want
