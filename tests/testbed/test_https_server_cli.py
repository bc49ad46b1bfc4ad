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


def _env(**extra: str) -> dict[str, str]:
    """The checkout on the path; no ``SSLKEYLOGFILE`` unless ``extra`` sets it."""
    env = {k: v for k, v in os.environ.items() if k != "SSLKEYLOGFILE"}
    return {**env, "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])), **extra}


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


def _start_cli(*args: str, cwd: Path | None = None, **env: str) -> tuple[subprocess.Popen[str], int]:
    """Start ``python -m testbed.https_server`` and wait for its "listening on" line."""
    cmd = [sys.executable, "-m", "testbed.https_server", "--port", "0", *args]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=_env(**env), cwd=cwd)
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


# -- key log (tls12.keylog): off by default, SSLKEYLOGFILE or --keylog --------------------------

KEYLOG_WARNING = "warning: writing TLS secrets to {} ({}); anyone who reads it can decrypt these connections\n"


def _get_with_keylog(port: int, keylog: Path) -> None:
    """Two GETs (the second resumes) with Python's ssl writing its own key log (OpenSSL's lines)."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    ctx.maximum_version = ssl.TLSVersion.TLSv1_2
    ctx.keylog_filename = str(keylog)
    session = None
    for _ in range(2):
        raw = socket.create_connection(("127.0.0.1", port), timeout=30)
        with ctx.wrap_socket(raw, session=session) as tls:
            tls.sendall(b"GET /hello.txt HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            while tls.recv(65536):
                pass
            session = tls.session


def _client_random_lines(path: Path) -> bytes:
    return b"".join(line for line in path.read_bytes().splitlines(keepends=True) if line.startswith(b"CLIENT_RANDOM "))


@pytest.mark.parametrize("how", ["SSLKEYLOGFILE", "--keylog"])
def test_cli_writes_the_key_log_openssl_writes(root: Path, tmp_path: Path, how: str) -> None:
    ours, theirs = tmp_path / "server.keys", tmp_path / "client.keys"
    if how == "SSLKEYLOGFILE":
        proc, port = _start_cli("--root", str(root), "--quiet", "--session-cache", SSLKEYLOGFILE=str(ours))
    else:
        proc, port = _start_cli("--root", str(root), "--quiet", "--session-cache", "--keylog", str(ours))
    try:
        _get_with_keylog(port, theirs)
    finally:
        err = _stop_cli(proc)
    assert err == KEYLOG_WARNING.format(ours, how)
    want = _client_random_lines(theirs)
    assert want.count(b"\n") == 2 and ours.read_bytes() == want


def test_cli_key_log_is_off_by_default(root: Path, tmp_path: Path) -> None:
    """No SSLKEYLOGFILE, no --keylog: nothing on stderr, no file anywhere in the working folder."""
    proc, port = _start_cli("--root", str(root), "--quiet", cwd=tmp_path)
    try:
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)  # not create_default_context: it reads SSLKEYLOGFILE
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
        conn = http.client.HTTPSConnection("127.0.0.1", port, timeout=30, context=ctx)
        conn.request("GET", "/hello.txt")
        assert conn.getresponse().read() == b"hello, world\n"
        conn.close()
    finally:
        err = _stop_cli(proc)
    assert err == "" and list(tmp_path.iterdir()) == []


def test_cli_refuses_a_key_log_it_cannot_write(root: Path, tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "testbed.https_server", "--root", str(root), "--port", "0",
         "--keylog", str(tmp_path / "missing" / "k.log")],
        capture_output=True, text=True, timeout=60, env=_env(),
    )  # fmt: skip
    assert proc.returncode == 2
    assert proc.stderr.splitlines()[-1].endswith(f"--keylog {tmp_path / 'missing' / 'k.log'}: cannot open for writing: No such file or directory")
