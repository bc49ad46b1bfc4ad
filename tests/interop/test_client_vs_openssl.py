"""Our :class:`tls12.ClientConnection` (through :func:`tls12.aio.connect`) against ``openssl s_server``.

``s_server -WWW`` serves files from its working directory as
``HTTP/1.0 200 ok`` responses and then closes the connection with
close_notify, which gives checkable bytes.  One s_server per module accepts
every suite; our client offers exactly one suite per test.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.interop.tls_peers import (
    ALL_SUITES,
    SIZES,
    OpenSSLServer,
    assert_same_bytes,
    openssl_s_server,
    split_http_response,
    suite_id,
)
from tls12 import ClientConfig
from tls12.aio import TLSStream, connect
from tls12.suites import CipherSuite

pytestmark = pytest.mark.interop


@pytest.fixture(scope="module")
def s_server(cert_files: tuple[Path, Path], docroot: tuple[Path, dict[int, bytes]]) -> Iterator[OpenSSLServer]:
    cert, key = cert_files
    with openssl_s_server(cert, key, docroot[0], "-WWW", "-tls1_2", "-cipher", "ALL:eNULL:@SECLEVEL=0") as server:
        yield server


async def _get(port: int, path: str, config: ClientConfig) -> tuple[TLSStream, bytes]:
    stream = await connect("127.0.0.1", port, config, handshake_timeout=20)
    try:
        stream.write(f"GET {path} HTTP/1.0\r\n\r\n".encode())
        await stream.drain()
        async with asyncio.timeout(60):
            raw = await stream.read_all()
    finally:
        await stream.close()
    return stream, raw


@pytest.mark.parametrize("size", SIZES)
@pytest.mark.parametrize("suite", ALL_SUITES, ids=suite_id)
def test_our_client_downloads_from_s_server(
    s_server: OpenSSLServer, docroot: tuple[Path, dict[int, bytes]], suite: CipherSuite, size: int
) -> None:
    config = ClientConfig(server_name="localhost", cipher_suites=(suite,))
    stream, raw = asyncio.run(_get(s_server.port, f"/file_{size}.bin", config))
    assert stream.handshake is not None
    assert stream.handshake.cipher_suite == suite
    assert stream.handshake.extended_master_secret  # OpenSSL 3 always accepts EMS
    assert stream.closed_cleanly, "s_server ends with close_notify"
    status, _, body = split_http_response(raw)
    assert status == 200
    assert_same_bytes(body, docroot[1][size])


@pytest.mark.parametrize(
    "suite",
    [CipherSuite.TLS_RSA_WITH_AES_128_CBC_SHA, CipherSuite.TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA256, CipherSuite.TLS_RSA_WITH_NULL_SHA256],
    ids=suite_id,
)
@pytest.mark.parametrize("ems", [True, False], ids=["ems", "no-ems"])
def test_our_client_resumes_session_with_s_server(
    s_server: OpenSSLServer, docroot: tuple[Path, dict[int, bytes]], suite: CipherSuite, ems: bool
) -> None:
    first_config = ClientConfig(server_name="localhost", cipher_suites=(suite,), offer_extended_master_secret=ems)
    first, raw1 = asyncio.run(_get(s_server.port, "/file_4000.bin", first_config))
    assert first.handshake is not None and not first.handshake.resumed
    assert first.handshake.extended_master_secret is ems
    session = first.conn.session  # type: ignore[attr-defined]
    assert session is not None
    second_config = ClientConfig(
        server_name="localhost", cipher_suites=(suite,), offer_extended_master_secret=ems, session=session
    )
    second, raw2 = asyncio.run(_get(s_server.port, "/file_4000.bin", second_config))
    assert second.handshake is not None
    assert second.handshake.resumed, "s_server did not resume the session"
    assert second.handshake.session_id == first.handshake.session_id
    assert second.conn.master_secret == first.conn.master_secret  # type: ignore[attr-defined]
    assert second.bytes_in < first.bytes_in, "an abbreviated handshake carries no certificate"
    for raw in (raw1, raw2):
        assert_same_bytes(split_http_response(raw)[2], docroot[1][4000])
