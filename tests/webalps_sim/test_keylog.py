"""The key log in WebALPS comes from the guardian: the host never holds a master secret.

* ``python -m webalps_sim.guardian`` with ``SSLKEYLOGFILE`` in its environment announces it on
  stderr and writes, through a WebALPS host, exactly the ``CLIENT_RANDOM`` lines Python's ``ssl``
  client writes -- RSA and ECDHE suites, full handshakes and resumptions from the host's cache;
* the host in ``webalps`` mode refuses ``--keylog`` and, given ``SSLKEYLOGFILE``, says where the
  key log comes from instead of writing one;
* in ``https`` mode the host holds the key and writes the lines curl writes.
"""

from __future__ import annotations

import socket
import ssl
import subprocess
import sys
from pathlib import Path

import pytest

from tests.webalps_sim.guardian_helpers import (
    REPO,
    SUITE_NAMES,
    GuardianProcess,
    child_env,
    client_context,
    provision,
    webalps_host,
)
from tls12.suites import CipherSuite

pytestmark = pytest.mark.interop

WARNING = "warning: writing TLS secrets to {} ({}); anyone who reads it can decrypt these connections"
SUITES = (CipherSuite.TLS_RSA_WITH_AES_128_CBC_SHA256, CipherSuite.TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA)


def _client_random_lines(path: Path) -> bytes:
    return b"".join(line for line in path.read_bytes().splitlines(keepends=True)
                    if line.startswith(b"CLIENT_RANDOM "))


def _get(port: int, ctx: ssl.SSLContext, session: ssl.SSLSession | None) -> tuple[ssl.SSLSession, bool]:
    with socket.create_connection(("127.0.0.1", port), timeout=60) as raw, \
            ctx.wrap_socket(raw, server_hostname="localhost", session=session) as tls:
        tls.sendall(b"GET /f HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
        while tls.recv(65536):
            pass
        assert tls.session is not None
        return tls.session, tls.session_reused


def _env_without_keylog(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in child_env().items() if k != "SSLKEYLOGFILE"}
    return {**env, **extra}


def test_the_guardian_writes_the_key_log_the_client_writes(tmp_path: Path) -> None:
    prov = provision(tmp_path)
    docroot = tmp_path / "www"
    docroot.mkdir()
    (docroot / "f").write_bytes(b"x" * 5000)
    ours, theirs = tmp_path / "guardian.keys", tmp_path / "client.keys"
    sock = tmp_path / "g.sock"
    guardian = GuardianProcess(prov.state_dir, sock, env={"SSLKEYLOGFILE": str(ours)})
    with guardian:
        assert guardian.proc is not None and guardian.proc.stderr is not None
        assert guardian.proc.stderr.readline().rstrip("\n") == WARNING.format(ours, "SSLKEYLOGFILE")
        server, remote = webalps_host(docroot, sock, store_size=4)
        with server:
            for suite in SUITES:
                ctx = client_context(prov.ca_pem, SUITE_NAMES[suite])
                ctx.keylog_filename = str(theirs)
                session, reused = _get(server.port, ctx, None)
                _, reused_again = _get(server.port, ctx, session)
                assert not reused and reused_again
        remote.close()
    want = _client_random_lines(theirs)
    assert want.count(b"\n") == 2 * len(SUITES) and ours.read_bytes() == want


def _host(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "webalps_sim.host", *args], cwd=REPO,
                          env=_env_without_keylog(**env), capture_output=True, text=True, timeout=60)


def test_a_webalps_host_leaves_the_key_log_to_the_guardian(tmp_path: Path) -> None:
    refused = _host("--mode", "webalps", "--docroot", str(tmp_path), "--guardian", "x",
                    "--keylog", str(tmp_path / "k.log"))
    assert refused.returncode == 2 and "--keylog is for --mode https" in refused.stderr
    keys = tmp_path / "k.log"
    noted = _host("--mode", "webalps", "--docroot", str(tmp_path), "--guardian",
                  str(tmp_path / "none.sock"), SSLKEYLOGFILE=str(keys))
    assert noted.returncode == 1 and "cannot reach the guardian" in noted.stderr
    assert "SSLKEYLOGFILE is not read in webalps mode" in noted.stderr and "guardian" in noted.stderr
    assert not keys.exists()


def test_an_https_host_writes_the_key_log_curl_writes(tmp_path: Path) -> None:
    docroot = tmp_path / "www"
    docroot.mkdir()
    (docroot / "f").write_bytes(b"y" * 100)
    ours, theirs = tmp_path / "host.keys", tmp_path / "curl.keys"
    host = subprocess.Popen([sys.executable, "-m", "webalps_sim.host", "--mode", "https", "--port",
                             "0", "--docroot", str(docroot), "--quiet", "--keylog", str(ours)],
                            cwd=REPO, env=_env_without_keylog(), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        assert host.stdout is not None
        url = host.stdout.readline().split()[-1]
        assert url.startswith("https://"), host.stderr
        out = subprocess.run(["curl", "-sSk", "--tls-max", "1.2", f"{url}/f"], capture_output=True,
                             timeout=60, env=_env_without_keylog(SSLKEYLOGFILE=str(theirs)))
        assert out.returncode == 0 and out.stdout == b"y" * 100, out.stderr
    finally:
        host.terminate()
        _, err = host.communicate(timeout=30)
    assert err.splitlines() == [WARNING.format(ours, "--keylog")]
    want = _client_random_lines(theirs)
    assert want.count(b"\n") == 1 and ours.read_bytes() == want
