"""The command-line programs: --help, clear errors, and a real run with curl through both."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from tests.interop.tls_peers import curl, file_bytes
from tls12.suites import CipherSuite

pytestmark = pytest.mark.interop


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.parametrize("module", ["sslsplit.server", "sslsplit.proxy"])
def test_help(module: str) -> None:
    out = subprocess.run([sys.executable, "-m", module, "--help"], capture_output=True, text=True, timeout=30)
    assert out.returncode == 0 and "usage:" in out.stdout and "--" in out.stdout


def test_clear_error_for_missing_root(tmp_path: Path) -> None:
    out = subprocess.run(
        [sys.executable, "-m", "sslsplit.server", "--root", str(tmp_path / "nope")], capture_output=True, text=True, timeout=30
    )
    assert out.returncode == 2 and "not a directory" in out.stderr


def _start(cmd: list[str], ready: str, env: dict[str, str] | None = None) -> subprocess.Popen[str]:
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    assert proc.stdout is not None
    line = proc.stdout.readline()
    if ready not in line:
        proc.kill()
        raise AssertionError(f"{cmd[2]} did not start: {line!r} {proc.stderr.read() if proc.stderr else ''}")
    return proc


def test_server_and_proxy_programs_with_curl(tmp_path: Path) -> None:
    (tmp_path / "www").mkdir()
    body = file_bytes(300_000)
    (tmp_path / "www" / "f.bin").write_bytes(body)
    port, store, listen = _free_port(), _free_port(), _free_port()
    server = _start(
        [sys.executable, "-m", "sslsplit.server", "--root", str(tmp_path / "www"), "--port", str(port), "--store-port", str(store)],
        "splitting server on",
    )
    try:
        proxy = _start(
            [sys.executable, "-m", "sslsplit.proxy", "--server", f"127.0.0.1:{port}", "--store", f"127.0.0.1:{store}",
             "--listen", f"127.0.0.1:{listen}", "--disk-cache", str(tmp_path / "cache")],
            "splitting proxy on",
        )  # fmt: skip
        try:
            for _ in range(2):
                out = tmp_path / "out.bin"
                result = curl(f"https://127.0.0.1:{listen}/f.bin", CipherSuite.TLS_RSA_WITH_AES_128_CBC_SHA256, out)
                assert result.returncode == 0, result.stderr
                assert out.read_bytes() == body
        finally:
            proxy.send_signal(signal.SIGTERM)
            p_out, _ = proxy.communicate(timeout=30)
        assert "2 connections (0 failed)" in p_out and "'memory'" in p_out
        assert any((tmp_path / "cache").rglob("*"))  # the disk level was filled
    finally:
        server.send_signal(signal.SIGTERM)
        s_out, _ = server.communicate(timeout=30)
    assert "2 connections" in s_out


def test_server_key_log_decrypts_what_the_client_sees_through_the_proxy(tmp_path: Path) -> None:
    """``SSLKEYLOGFILE`` for the splitting server: its lines are curl's own, so a capture between
    client and proxy (where the records are whole again) decrypts with the server's key log."""
    (tmp_path / "www").mkdir()
    (tmp_path / "www" / "f.bin").write_bytes(file_bytes(50_000))
    ours, theirs = tmp_path / "server.keys", tmp_path / "curl.keys"
    env = {k: v for k, v in os.environ.items() if k != "SSLKEYLOGFILE"}
    port, store, listen = _free_port(), _free_port(), _free_port()
    server = _start(
        [sys.executable, "-m", "sslsplit.server", "--root", str(tmp_path / "www"), "--port", str(port), "--store-port", str(store)],
        "splitting server on", env={**env, "SSLKEYLOGFILE": str(ours)},
    )
    try:
        proxy = _start(
            [sys.executable, "-m", "sslsplit.proxy", "--server", f"127.0.0.1:{port}", "--store", f"127.0.0.1:{store}",
             "--listen", f"127.0.0.1:{listen}"],
            "splitting proxy on", env=env,
        )  # fmt: skip
        try:
            for suite in ("AES128-SHA256", "NULL-SHA256:@SECLEVEL=0"):
                result = subprocess.run(
                    ["curl", "-sSk", "--tls-max", "1.2", "--ciphers", suite, "-o", str(tmp_path / "out.bin"),
                     f"https://127.0.0.1:{listen}/f.bin"],
                    capture_output=True, text=True, timeout=60, env={**env, "SSLKEYLOGFILE": str(theirs)},
                )  # fmt: skip
                assert result.returncode == 0, result.stderr
        finally:
            proxy.send_signal(signal.SIGTERM)
            proxy.communicate(timeout=30)
    finally:
        server.send_signal(signal.SIGTERM)
        _, s_err = server.communicate(timeout=30)
    assert s_err.splitlines()[0] == (f"warning: writing TLS secrets to {ours} (SSLKEYLOGFILE); "
                                     "anyone who reads it can decrypt these connections")
    want = b"".join(line for line in theirs.read_bytes().splitlines(keepends=True) if line.startswith(b"CLIENT_RANDOM "))
    assert want.count(b"\n") == 2 and ours.read_bytes() == want


def test_upstream_mode_forwards_to_an_existing_http_server(tmp_path: Path) -> None:
    """The STunnel-like deployment: splitting in front of an unmodified HTTP server (Python's http.server)."""
    import functools
    import http.server
    import threading

    from sslsplit.aio import BackgroundLoop
    from sslsplit.aio.server import SplittingServer
    from tests.interop.split_fixtures import SplitSetup
    from tls12.certs import generate_self_signed

    body = file_bytes(1 << 20, seed=5)
    (tmp_path / "big.bin").write_bytes(body)
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(tmp_path))
    upstream = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=upstream.serve_forever, daemon=True)
    thread.start()
    try:
        with BackgroundLoop() as loop:
            server = SplittingServer(None, generate_self_signed(), upstream=("127.0.0.1", upstream.server_address[1]))
            loop.run(server.start())
            setup = SplitSetup(loop, server)
            proxy = setup.proxy()
            sent = []
            for _ in range(2):
                out = tmp_path / "out.bin"

                def get() -> None:
                    result = curl(f"https://127.0.0.1:{proxy.port}/big.bin", CipherSuite.TLS_RSA_WITH_AES_128_CBC_SHA, out)  # noqa: B023
                    assert result.returncode == 0, result.stderr

                sent.append(setup.measure(get))
                assert out.read_bytes() == body
            assert sent[1] <= 0.05 * sent[0]
            missing = subprocess.run(
                ["curl", "-sk", "-o", "/dev/null", "-w", "%{http_code}", f"https://127.0.0.1:{proxy.port}/missing"],
                capture_output=True, text=True, timeout=30,
            )
            assert missing.stdout == "404"
            loop.run(proxy.close())
            loop.run(server.close())
    finally:
        upstream.shutdown()
