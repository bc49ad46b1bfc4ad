"""Unmodified clients download files byte-exact from ``testbed.https_server``, for every suite.

Clients: curl, ``openssl s_client`` (request scripted on stdin) and Python's
``ssl`` module through ``http.client``.  Sizes cover the record boundaries:
empty, one byte, under one record, exactly one full record (16384 B), and
many records (1 MiB, 16 MiB).  The server's own record of each connection
confirms which suite was negotiated.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from testbed.apps.harness import BackgroundServer
from tests.interop.tls_peers import (
    ALL_SUITES,
    SIZES,
    assert_same_bytes,
    curl,
    python_ssl_get,
    s_client_get,
    split_http_response,
    suite_id,
    wait_for_record,
)
from tls12.suites import SUITES, CipherSuite

pytestmark = pytest.mark.interop


def _check_record(server: BackgroundServer, before: int, suite: CipherSuite, size: int) -> None:
    record = wait_for_record(server, before)
    assert record.cipher_suite == suite, f"negotiated {record.cipher_suite:#06x}, asked {suite:#06x}"
    assert record.error is None
    assert record.requests == 1
    # the server sent at least the body plus one MAC per record
    assert record.bytes_out >= size + SUITES[suite].mac_length * max(1, size // 16384)


@pytest.mark.parametrize("size", SIZES)
@pytest.mark.parametrize("suite", ALL_SUITES, ids=suite_id)
def test_curl_downloads_byte_exact(
    https_server: BackgroundServer, docroot: tuple[Path, dict[int, bytes]], tmp_path: Path, suite: CipherSuite, size: int
) -> None:
    before = https_server.wait_idle()
    out = tmp_path / "body.bin"
    proc = curl(f"{https_server.url}/file_{size}.bin", suite, out, "--write-out", "%{http_code}")
    assert proc.returncode == 0, f"curl exit {proc.returncode}: {proc.stderr}"
    assert proc.stdout == "200"
    assert_same_bytes(out.read_bytes(), docroot[1][size])
    _check_record(https_server, before, suite, size)


@pytest.mark.parametrize("size", SIZES)
@pytest.mark.parametrize("suite", ALL_SUITES, ids=suite_id)
def test_python_ssl_downloads_byte_exact(
    https_server: BackgroundServer, docroot: tuple[Path, dict[int, bytes]], suite: CipherSuite, size: int
) -> None:
    before = https_server.wait_idle()
    status, body, cipher = python_ssl_get(https_server.port, f"/file_{size}.bin", suite)
    assert status == 200
    assert cipher == SUITES[suite].openssl_name
    assert_same_bytes(body, docroot[1][size])
    _check_record(https_server, before, suite, size)


@pytest.mark.parametrize("size", SIZES)
@pytest.mark.parametrize("suite", ALL_SUITES, ids=suite_id)
def test_openssl_s_client_downloads_byte_exact(
    https_server: BackgroundServer, docroot: tuple[Path, dict[int, bytes]], suite: CipherSuite, size: int
) -> None:
    before = https_server.wait_idle()
    proc = s_client_get(https_server.port, f"/file_{size}.bin", suite)
    assert proc.returncode == 0, f"s_client exit {proc.returncode}: {proc.stderr.decode(errors='replace')[-2000:]}"
    status, headers, body = split_http_response(proc.stdout)
    assert status == 200
    assert headers["content-length"] == str(size)
    assert_same_bytes(body, docroot[1][size])
    _check_record(https_server, before, suite, size)


def test_curl_keep_alive_reuses_one_connection(
    https_server: BackgroundServer, docroot: tuple[Path, dict[int, bytes]], tmp_path: Path
) -> None:
    """curl fetching three URLs in one invocation uses one TLS connection (keep-alive)."""
    suite = CipherSuite.TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA256
    before = https_server.wait_idle()
    sizes = [4000, 1 << 20, 1]
    urls = [f"{https_server.url}/file_{n}.bin" for n in sizes]
    outs = [tmp_path / f"out{i}.bin" for i in range(len(sizes))]
    # curl pairs the n-th --output with the n-th URL
    args = [a for u, o in zip(urls[1:], outs[1:], strict=True) for a in (u, "--output", str(o))]
    proc = curl(urls[0], suite, outs[0], *args)
    assert proc.returncode == 0, proc.stderr
    for n, out in zip(sizes, outs, strict=True):
        assert_same_bytes(out.read_bytes(), docroot[1][n])
    record = wait_for_record(https_server, before)
    assert record.requests == 3
    assert len(https_server.stats.connections) == before + 1
