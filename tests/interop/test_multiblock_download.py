"""Downloads through OpenSSL's multi-block seal: ``ServerConfig(random_ivs=True)``.

With random IVs the server's large writes (256 KiB pieces of a file) are sealed by
``RecordCipher.seal_stream``, 8 records per interleaved pass of the stitched AES-CBC-HMAC
cipher.  curl, Python's ``ssl`` and ``openssl s_client`` must get every byte back, for the
CBC suites that have that pass (SHA-1 and SHA-256 MACs) and at sizes around its runs.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from testbed.apps.harness import BackgroundServer
from tests.interop.tls_peers import (
    assert_same_bytes,
    curl,
    make_docroot,
    python_ssl_get,
    s_client_get,
    split_http_response,
    suite_id,
)
from tls12.certs import Credentials
from tls12.config import ServerConfig
from tls12.record import WriteProtection
from tls12.suites import SUITES, CipherSuite

pytestmark = pytest.mark.interop

CBC_SUITES = [s for s, p in SUITES.items() if p.block_size]
SIZES = [4 * 16384, 8 * 16384 + 1, 5 << 20]


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[int, bytes]]:
    root = tmp_path_factory.mktemp("www-mb")
    return root, make_docroot(root, SIZES)


@pytest.fixture(scope="module")
def server(credentials: Credentials, files: tuple[Path, dict[int, bytes]]) -> Iterator[BackgroundServer]:
    config = ServerConfig(credentials=credentials, cipher_suites=tuple(CBC_SUITES), random_ivs=True)
    with BackgroundServer(files[0], config, handshake_timeout=20.0, idle_timeout=20.0) as running:
        yield running


@pytest.fixture
def streams(monkeypatch: pytest.MonkeyPatch) -> list[tuple[int, bool]]:
    """(records, whether they went through a multi-block cipher) of every bulk seal by the server."""
    seen: list[tuple[int, bool]] = []
    original = WriteProtection.seal_many

    def spy(self: WriteProtection, records: list[Any]) -> bytes:
        if self.random_ivs and len(records) >= 4:
            seen.append((len(records), bool(getattr(self._cipher, "multiblock", False))))
        return original(self, records)

    monkeypatch.setattr(WriteProtection, "seal_many", spy)
    return seen


@pytest.mark.parametrize("size", SIZES)
@pytest.mark.parametrize("suite", CBC_SUITES, ids=suite_id)
def test_curl_python_ssl_and_s_client_download_byte_exact(
    server: BackgroundServer, files: tuple[Path, dict[int, bytes]], streams: list[tuple[int, bool]],
    tmp_path: Path, suite: CipherSuite, size: int,
) -> None:
    path, want = f"/file_{size}.bin", files[1][size]
    out = tmp_path / "body.bin"
    proc = curl(f"{server.url}{path}", suite, out)
    assert proc.returncode == 0, proc.stderr
    assert_same_bytes(out.read_bytes(), want)
    status, body, cipher = python_ssl_get(server.port, path, suite)
    assert (status, cipher) == (200, SUITES[suite].openssl_name)
    assert_same_bytes(body, want)
    s_client = s_client_get(server.port, path, suite)
    assert s_client.returncode == 0, s_client.stderr[-2000:]
    assert_same_bytes(split_http_response(s_client.stdout)[2], want)
    assert streams and all(multiblock for _, multiblock in streams)
    if size > 1 << 20:
        assert max(n for n, _ in streams) >= 8  # whole 256 KiB writes: runs of 8
