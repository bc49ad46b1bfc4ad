"""Unmodified clients (curl, openssl s_client, Python ssl) download through an SSL-splitting proxy.

Byte-exact bodies for 1 B ... 16 MiB in NULL mode and key-expose AES-CBC mode;
with a warm proxy the origin's bytes on the wire fall by at least 95 % for 1 MiB.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.interop.split_fixtures import SplitSetup, split_setup
from tests.interop.tls_peers import (
    MIB,
    assert_same_bytes,
    curl,
    make_docroot,
    python_ssl_get,
    s_client_get,
    split_http_response,
)
from tls12.certs import Credentials
from tls12.suites import SUITES, CipherSuite

pytestmark = pytest.mark.interop

SPLIT_SIZES = [1, 4000, 16384, MIB, 16 * MIB]
MODES = {
    "null": CipherSuite.TLS_RSA_WITH_NULL_SHA,
    "key-expose": CipherSuite.TLS_RSA_WITH_AES_128_CBC_SHA,
}


@pytest.fixture(scope="module")
def split_docroot(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[int, bytes]]:
    root = tmp_path_factory.mktemp("splitwww")
    return root, make_docroot(root, SPLIT_SIZES)


@pytest.fixture(scope="module")
def split(credentials: Credentials, split_docroot: tuple[Path, dict[int, bytes]]) -> Iterator[SplitSetup]:
    with split_setup(split_docroot[0], credentials) as setup:
        yield setup


def _download(client: str, port: int, size: int, suite: CipherSuite, tmp_path: Path) -> bytes:
    path = f"/file_{size}.bin"
    if client == "curl":
        out = tmp_path / "out.bin"
        result = curl(f"https://127.0.0.1:{port}{path}", suite, out)
        assert result.returncode == 0, result.stderr
        return out.read_bytes()
    if client == "s_client":
        result = s_client_get(port, path, suite)
        status, _, body = split_http_response(result.stdout)
        assert status == 200, result.stderr[-500:]
        return body
    status, body, cipher = python_ssl_get(port, path, suite)
    assert status == 200 and cipher == SUITES[suite].openssl_name
    return body


@pytest.mark.parametrize("size", SPLIT_SIZES)
@pytest.mark.parametrize("mode", list(MODES))
@pytest.mark.parametrize("client", ["curl", "s_client", "python"])
def test_download_through_proxy(
    split: SplitSetup, split_docroot: tuple[Path, dict[int, bytes]], client: str, mode: str, size: int, tmp_path: Path
) -> None:
    proxy = split.proxy()
    body = _download(client, proxy.port, size, MODES[mode], tmp_path)
    assert_same_bytes(body, split_docroot[1][size])
    assert proxy.stats.failed == 0


@pytest.mark.parametrize("mode", list(MODES))
@pytest.mark.parametrize("client", ["curl", "s_client", "python"])
def test_warm_proxy_saves_95_percent(
    split: SplitSetup, split_docroot: tuple[Path, dict[int, bytes]], client: str, mode: str, tmp_path: Path
) -> None:
    proxy = split.proxy()
    got: list[bytes] = []
    cold = split.measure(lambda: got.append(_download(client, proxy.port, MIB, MODES[mode], tmp_path)))
    warm = split.measure(lambda: got.append(_download(client, proxy.port, MIB, MODES[mode], tmp_path)))
    for body in got:
        assert_same_bytes(body, split_docroot[1][MIB])
    assert cold > MIB  # the cold proxy fetched every payload from the origin's record store
    assert warm <= 0.05 * cold, f"warm {warm} B vs cold {cold} B"


@pytest.mark.parametrize(
    "suite", [s for s, p in SUITES.items() if s not in MODES.values() and not p.aead], ids=lambda s: SUITES[s].openssl_name
)
def test_every_other_suite_through_proxy(
    split: SplitSetup, split_docroot: tuple[Path, dict[int, bytes]], suite: CipherSuite, tmp_path: Path
) -> None:
    proxy = split.proxy()
    for client in ("curl", "python"):
        assert_same_bytes(_download(client, proxy.port, MIB, suite, tmp_path), split_docroot[1][MIB])
