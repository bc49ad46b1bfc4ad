"""Our server and client against OpenSSL in the less travelled corners of TLS 1.2.

* handshake messages fragmented over many small records, in both directions
  (``-max_send_frag 512`` on s_client and on s_server);
* repeated resumption (``s_client -reconnect``: one full and five abbreviated
  handshakes);
* SNI reaches the server; a client that wants TLS 1.3 only, a TLS 1.0 client,
  and a client without a common cipher suite are refused with the right alert;
* a renegotiation attempt is refused (no_renegotiation).
"""

from __future__ import annotations

import asyncio
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from testbed.apps.harness import BackgroundServer
from tests.interop.tls_peers import (
    MIB,
    OpenSSLServer,
    assert_same_bytes,
    curl,
    openssl_s_server,
    require_tool,
    s_client_get,
    split_http_response,
    wait_for_record,
)
from tls12 import ClientConfig
from tls12.aio import connect
from tls12.suites import CipherSuite

pytestmark = pytest.mark.interop

AES = CipherSuite.TLS_RSA_WITH_AES_128_CBC_SHA
ECDHE = CipherSuite.TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA256


def _s_client(port: int, *args: str, stdin: bytes = b"", timeout: float = 60) -> subprocess.CompletedProcess[bytes]:
    cmd = [require_tool("openssl"), "s_client", "-connect", f"127.0.0.1:{port}", *args]
    return subprocess.run(cmd, input=stdin, capture_output=True, timeout=timeout)


def test_s_client_with_512_byte_fragments(https_server: BackgroundServer, docroot: tuple[Path, dict[int, bytes]]) -> None:
    """OpenSSL splits its ClientHello, ClientKeyExchange and request into 512-byte records."""
    request = b"GET /file_4000.bin HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n"
    proc = _s_client(https_server.port, "-cipher", "ECDHE-RSA-AES128-SHA256", "-max_send_frag", "512", "-quiet", "-ign_eof", stdin=request)
    assert proc.returncode == 0, proc.stderr.decode(errors="replace")[-2000:]
    status, _, body = split_http_response(proc.stdout)
    assert status == 200
    assert_same_bytes(body, docroot[1][4000])


@pytest.fixture(scope="module")
def fragmenting_s_server(cert_files: tuple[Path, Path], docroot: tuple[Path, dict[int, bytes]]) -> Iterator[OpenSSLServer]:
    cert, key = cert_files
    with openssl_s_server(cert, key, docroot[0], "-WWW", "-tls1_2", "-max_send_frag", "512") as server:
        yield server


@pytest.mark.parametrize("suite", [AES, ECDHE], ids=["AES128-SHA", "ECDHE-RSA-AES128-SHA256"])
def test_our_client_reassembles_fragmented_server_flight(
    fragmenting_s_server: OpenSSLServer, docroot: tuple[Path, dict[int, bytes]], suite: CipherSuite
) -> None:
    """The certificate (about 800 bytes) and ServerKeyExchange arrive over several records."""

    async def main() -> bytes:
        stream = await connect("127.0.0.1", fragmenting_s_server.port, ClientConfig(server_name="localhost", cipher_suites=(suite,)))
        stream.write(f"GET /file_{MIB}.bin HTTP/1.0\r\n\r\n".encode())
        async with asyncio.timeout(60):
            raw = await stream.read_all()
        await stream.close()
        return raw

    status, _, body = split_http_response(asyncio.run(main()))
    assert status == 200
    assert_same_bytes(body, docroot[1][MIB])


def test_s_client_reconnect_resumes_five_times(https_server: BackgroundServer) -> None:
    before = https_server.wait_idle()
    proc = _s_client(https_server.port, "-cipher", "AES128-SHA", "-reconnect")
    assert proc.returncode == 0, proc.stderr.decode(errors="replace")[-2000:]
    lines = proc.stdout.decode(errors="replace").splitlines()
    assert sum(line.startswith("Reused, ") for line in lines) == 5
    https_server.wait_idle()
    records = list(https_server.stats.connections)[before:]
    assert [r.resumed for r in records] == [False] + [True] * 5


def test_sni_reaches_the_server(https_server: BackgroundServer, docroot: tuple[Path, dict[int, bytes]], tmp_path: Path) -> None:
    before = https_server.wait_idle()
    url = f"https://localhost:{https_server.port}/file_1.bin"
    proc = curl(url, ECDHE, tmp_path / "out", "--resolve", f"localhost:{https_server.port}:127.0.0.1")
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "out").read_bytes() == docroot[1][1]
    assert wait_for_record(https_server, before).server_name == "localhost"


def test_tls13_only_client_is_refused(https_server: BackgroundServer, tmp_path: Path) -> None:
    proc = curl(f"{https_server.url}/file_1.bin", AES, tmp_path / "out", "--tlsv1.3")
    assert proc.returncode == 35, proc.stderr  # CURLE_SSL_CONNECT_ERROR
    assert not (tmp_path / "out").exists()


def test_tls10_client_gets_protocol_version_alert(https_server: BackgroundServer) -> None:
    proc = _s_client(https_server.port, "-tls1", "-cipher", "AES128-SHA:@SECLEVEL=0")
    assert proc.returncode != 0
    assert b"alert protocol version" in proc.stderr, proc.stderr[-2000:]


def test_no_common_suite_gets_handshake_failure(https_server: BackgroundServer) -> None:
    before = https_server.wait_idle()
    proc = _s_client(https_server.port, "-tls1_2", "-cipher", "AES256-GCM-SHA384")  # not implemented here
    assert proc.returncode != 0
    assert b"alert handshake failure" in proc.stderr, proc.stderr[-2000:]
    assert wait_for_record(https_server, before).error == "HandshakeFailure"


def test_renegotiation_is_refused(https_server: BackgroundServer, docroot: tuple[Path, dict[int, bytes]]) -> None:
    """s_client's ``R`` command starts a renegotiation; our server answers no_renegotiation."""
    proc = _s_client(https_server.port, "-cipher", "AES128-SHA", stdin=b"R\n")
    output = (proc.stdout + proc.stderr).decode(errors="replace")
    assert "RENEGOTIATING" in output
    assert "no renegotiation" in output, output[-2000:]
    # the server itself is unaffected
    proc = s_client_get(https_server.port, "/file_4000.bin", AES)
    assert_same_bytes(split_http_response(proc.stdout)[2], docroot[1][4000])
