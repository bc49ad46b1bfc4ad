"""Unmodified clients fetch through a WebALPS host, byte-exact, verifying the guardian's chain.

The guardian runs as its own process; the host (:mod:`webalps_sim.aio.host`) holds the guardian's
certificate chain only.  curl and Python's ``ssl`` verify that chain against the WebALPS CA
(``--cacert``, ``create_default_context(cafile=...)``) with host-name checking, for every suite
the guardian serves (RSA key exchange, CBC) at 0 B, 1 B, 2 KB, 1 MiB and 16 MiB.  A client
that trusts another CA refuses the host.
"""

from __future__ import annotations

import os
import socket
import ssl
from collections.abc import Iterator
from pathlib import Path

import pytest
from cryptography import x509

from testbed.apps.harness import BackgroundServer
from tests.webalps_sim.guardian_helpers import (
    SUITE_NAMES,
    GuardianProcess,
    Provisioned,
    client_context,
    curl_get,
    provision,
    python_get,
    webalps_host,
)
from webalps_sim.aio.host import WEBALPS_SUITES
from webalps_sim.ca import guardian_identity, init_ca
from webalps_sim.measure import measure

pytestmark = pytest.mark.interop

SIZES = {"0B": 0, "1B": 1, "2KB": 2048, "1MiB": 1 << 20, "16MiB": 16 << 20}
SMALL = ["0B", "1B", "2KB", "1MiB"]
NAMES = [SUITE_NAMES[s] for s in WEBALPS_SUITES]


@pytest.fixture(scope="module")
def setup(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Provisioned, BackgroundServer, Path]]:
    tmp = tmp_path_factory.mktemp("webalps-fetch")
    prov = provision(tmp)
    docroot = tmp / "www"
    docroot.mkdir()
    for name, size in SIZES.items():
        (docroot / name).write_bytes(os.urandom(size))
    with GuardianProcess(prov.state_dir, tmp / "guardian.sock"):
        server, remote = webalps_host(docroot, tmp / "guardian.sock")
        with server:
            yield prov, server, docroot
        remote.close()


@pytest.mark.parametrize("size", SMALL)
@pytest.mark.parametrize("cipher", NAMES)
def test_curl_fetches_byte_exact(setup: tuple[Provisioned, BackgroundServer, Path], cipher: str,
                                 size: str) -> None:
    prov, server, docroot = setup
    out = curl_get(f"https://localhost:{server.port}/{size}", prov.ca_pem, cipher)
    assert out.returncode == 0, out.stderr
    assert out.stdout == (docroot / size).read_bytes()


@pytest.mark.parametrize("size", SMALL)
@pytest.mark.parametrize("cipher", NAMES)
def test_python_ssl_fetches_byte_exact(setup: tuple[Provisioned, BackgroundServer, Path],
                                       cipher: str, size: str) -> None:
    prov, server, docroot = setup
    status, headers, body = python_get(server.port, f"/{size}", prov.ca_pem, cipher)
    assert status == 200 and headers["Server"] == "tls12-https-server"  # served by the host
    assert body == (docroot / size).read_bytes()


@pytest.mark.slow
@pytest.mark.parametrize("cipher", NAMES)
def test_sixteen_mebibytes(setup: tuple[Provisioned, BackgroundServer, Path], cipher: str) -> None:
    prov, server, docroot = setup
    want = (docroot / "16MiB").read_bytes()
    out = curl_get(f"https://localhost:{server.port}/16MiB", prov.ca_pem, cipher)
    assert out.returncode == 0, out.stderr
    assert out.stdout == want
    _, _, body = python_get(server.port, "/16MiB", prov.ca_pem, cipher)
    assert body == want


def test_chain_is_the_guardians_and_binds_its_measurement(
        setup: tuple[Provisioned, BackgroundServer, Path]) -> None:
    prov, server, _ = setup
    ctx = client_context(prov.ca_pem, NAMES[0])
    with socket.create_connection(("127.0.0.1", server.port)) as raw, \
            ctx.wrap_socket(raw, server_hostname="localhost") as tls:
        der = tls.getpeercert(binary_form=True)
    assert der is not None
    leaf = x509.load_der_x509_certificate(der)
    identity = guardian_identity(leaf)
    assert identity.app == "null" and identity.measurement == measure("null")
    assert server.config.credentials.private_key is None  # the host holds the chain only


def test_a_client_trusting_another_ca_refuses(setup: tuple[Provisioned, BackgroundServer, Path],
                                              tmp_path: Path) -> None:
    _, server, _ = setup
    other = init_ca(tmp_path / "other-ca")
    out = curl_get(f"https://localhost:{server.port}/1B", other, NAMES[0])
    assert out.returncode == 60, out.stderr  # peer certificate cannot be authenticated
    with pytest.raises(ssl.SSLCertVerificationError):
        python_get(server.port, "/1B", other, NAMES[0])


def _gnutls_get(port: int, path: str, ca_pem: Path) -> tuple[int, bytes, bytes]:
    """``gnutls-cli`` (GnuTLS, libtasn1) sending one HTTP/1.0 GET; (status, body, stderr)."""
    import subprocess

    out = subprocess.run(
        ["gnutls-cli", "--x509cafile", str(ca_pem), "--logfile", "/dev/null",
         "--priority", "NORMAL:-VERS-ALL:+VERS-TLS1.2:+RSA", "-p", str(port), "localhost"],
        input=f"GET /{path} HTTP/1.0\r\nHost: localhost\r\n\r\n".encode(),
        capture_output=True, timeout=120)
    head, _, body = out.stdout.partition(b"\r\n\r\n")
    return out.returncode, body if head.startswith(b"HTTP/1.1 200 ") else b"<no 200>", out.stderr


@pytest.mark.parametrize("size", SMALL)
def test_gnutls_cli_fetches_byte_exact(setup: tuple[Provisioned, BackgroundServer, Path],
                                       size: str) -> None:
    """GnuTLS parses the guardian's certificate (its measurement OID fits libtasn1) and the
    download through the host is byte-exact."""
    prov, server, docroot = setup
    status, body, err = _gnutls_get(server.port, size, prov.ca_pem)
    assert status == 0, err
    assert body == (docroot / size).read_bytes()


@pytest.mark.parametrize("size", SMALL)
def test_debian_wget_fetches_byte_exact(setup: tuple[Provisioned, BackgroundServer, Path],
                                        size: str) -> None:
    """Debian's wget (built on GnuTLS) verifies the chain against the WebALPS CA."""
    import subprocess

    prov, server, docroot = setup
    out = subprocess.run(["wget", "-q", "-O", "-", f"--ca-certificate={prov.ca_pem}",
                          "--secure-protocol=TLSv1_2", f"https://localhost:{server.port}/{size}"],
                         capture_output=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout == (docroot / size).read_bytes()
