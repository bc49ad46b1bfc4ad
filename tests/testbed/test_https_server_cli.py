"""The HTTPS file server's command line (``python -m testbed.https_server``): help, argument
errors, a self-signed NULL-suite server with a session cache, a server with given credentials.

The server's HTTP semantics are in ``test_https_server.py``; these tests start the real program.
"""

from __future__ import annotations

import http.client
import os
import selectors
import socket
import ssl
import subprocess
import sys
from pathlib import Path

import pytest

from tls12.certs import write_credentials
from tls12.testing import credentials

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A document root with the one file these tests fetch."""
    www = tmp_path_factory.mktemp("site") / "www"
    www.mkdir()
    (www / "hello.txt").write_bytes(b"hello, world\n")
    return www

# -- command line ---------------------------------------------------------------------


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))}


def test_cli_help() -> None:
    proc = subprocess.run([sys.executable, "-m", "testbed.https_server", "--help"], capture_output=True, text=True, timeout=60, env=_env())
    assert proc.returncode == 0
    for option in ("--root", "--port", "--host", "--cert", "--key", "--ciphers", "--session-cache", "--no-coalesce"):
        assert option in proc.stdout


def test_cli_rejects_cert_without_key(tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "testbed.https_server", "--root", str(tmp_path), "--cert", str(tmp_path / "c.pem")],
        capture_output=True, text=True, timeout=60, env=_env(),
    )  # fmt: skip
    assert proc.returncode == 2
    assert "--cert and --key" in proc.stderr


def _start_cli(*args: str) -> tuple[subprocess.Popen[str], int]:
    """Start ``python -m testbed.https_server`` and wait for its "listening on" line."""
    cmd = [sys.executable, "-m", "testbed.https_server", "--port", "0", *args]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=_env())
    assert proc.stdout is not None
    sel = selectors.DefaultSelector()
    sel.register(proc.stdout, selectors.EVENT_READ)
    if not sel.select(timeout=30):
        proc.kill()
        pytest.fail("server did not print its address within 30 s")
    line = proc.stdout.readline().strip()
    assert line.startswith("listening on https://127.0.0.1:"), line
    return proc, int(line.rsplit(":", 1)[1])


def _stop_cli(proc: subprocess.Popen[str]) -> str:
    proc.terminate()  # SIGTERM: the server stops cleanly
    try:
        _, err = proc.communicate(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
        _, err = proc.communicate(timeout=10)
    assert proc.returncode == 0, err
    return err


def test_cli_self_signed_null_suite_and_session_cache(root: Path) -> None:
    """No --cert: a fresh self-signed certificate; --session-cache lets Python's ssl resume."""
    proc, port = _start_cli("--root", str(root), "--ciphers", "NULL-SHA256", "--session-cache")
    try:
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
        ctx.maximum_version = ssl.TLSVersion.TLSv1_2
        ctx.set_ciphers("NULL-SHA256:@SECLEVEL=0")
        session = None
        for expect_reused in (False, True):
            conn = http.client.HTTPSConnection("127.0.0.1", port, context=ctx, timeout=30)
            conn.connect()
            if session is not None:  # resume by session ID: wrap a new socket with the old session
                conn.sock.close()
                raw = socket.create_connection(("127.0.0.1", port), timeout=30)
                conn.sock = ctx.wrap_socket(raw, session=session)
            conn.request("GET", "/hello.txt")
            resp = conn.getresponse()
            assert (resp.status, resp.read()) == (200, b"hello, world\n")
            tls = conn.sock
            assert isinstance(tls, ssl.SSLSocket)
            assert tls.cipher()[0] == "NULL-SHA256"
            assert tls.session_reused is expect_reused
            session = tls.session
            conn.close()
    finally:
        _stop_cli(proc)


def test_cli_serves_with_given_certificate(root: Path, tmp_path: Path) -> None:
    creds = credentials()
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    write_credentials(creds, cert, key)
    proc, port = _start_cli(
        "--root", str(root), "--cert", str(cert), "--key", str(key), "--ciphers", "ECDHE-RSA-AES128-SHA256:AES128-SHA"
    )
    try:
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        ctx.load_verify_locations(cert)  # our certificate verifies for 127.0.0.1
        conn = http.client.HTTPSConnection("127.0.0.1", port, context=ctx, timeout=30)
        conn.request("GET", "/hello.txt")
        resp = conn.getresponse()
        assert (resp.status, resp.read()) == (200, b"hello, world\n")
        # Python's default cipher list (no SHA-1 MACs) picks our ECDHE-SHA256 suite
        assert conn.sock.cipher()[0] == "ECDHE-RSA-AES128-SHA256"  # type: ignore[union-attr]
        conn.close()
    finally:
        err = _stop_cli(proc)
    assert '"GET /hello.txt HTTP/1.1" 200 body=13' in err
