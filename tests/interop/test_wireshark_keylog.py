"""Wireshark reads what the testbed does: a real loopback capture of the project's HTTPS server,
decrypted by tshark with the key log the server wrote (``--keylog``, :mod:`tls12.keylog`).

The client (curl) keeps no key log: whatever tshark decrypts, it decrypts with the server's
lines alone. The same capture without the key log shows no HTTP at all (the negative control),
and tshark finds no malformed packet in it. Needs tcpdump, tshark and root for the capture on
``lo`` (``.ci/run`` installs both; CI runs as root); never skipped.
"""

from __future__ import annotations

import os
import selectors
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
BODY = b"".join(b"line %05d of a page tshark must show decrypted\n" % i for i in range(200))

pytestmark = pytest.mark.interop


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "SSLKEYLOGFILE"}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))
    return env


def _server(root: Path, keylog: Path, suite: str) -> tuple[subprocess.Popen[str], int]:
    proc = subprocess.Popen([sys.executable, "-m", "testbed.https_server", "--port", "0", "--root",
                             str(root), "--quiet", "--keylog", str(keylog), "--ciphers", suite],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=_env())  # fmt: skip
    assert proc.stdout is not None
    sel = selectors.DefaultSelector()
    sel.register(proc.stdout, selectors.EVENT_READ)
    if not sel.select(timeout=30):
        proc.kill()
        pytest.fail("the server did not print its address within 30 s")
    line = proc.stdout.readline().strip()
    return proc, int(line.rsplit(":", 1)[1])


def _capture(port: int, out: Path) -> subprocess.Popen[str]:
    """tcpdump on ``lo`` for ``port``, started and listening when this returns."""
    proc = subprocess.Popen(["tcpdump", "--immediate-mode", "-i", "lo", "-U", "-s", "0", "-w",
                             str(out), "tcp", "port", str(port)],
                            stderr=subprocess.PIPE, text=True)  # fmt: skip
    assert proc.stderr is not None
    deadline = time.monotonic() + 20
    while "listening on" not in (line := proc.stderr.readline()):
        assert line and time.monotonic() < deadline, "tcpdump did not start"
    return proc


def _tshark(*args: str) -> str:
    out = subprocess.run(["tshark", *args], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    return out.stdout


@pytest.mark.parametrize("suite", ["AES128-SHA", "ECDHE-RSA-AES128-GCM-SHA256"])
def test_tshark_decrypts_a_real_capture_with_the_servers_key_log(tmp_path: Path,
                                                                 suite: str) -> None:  # fmt: skip
    root = tmp_path / "www"
    root.mkdir()
    (root / "page.txt").write_bytes(BODY)
    keys, cap = tmp_path / "server.keys", tmp_path / "run.pcap"
    server, port = _server(root, keys, suite)
    try:
        tcpdump = _capture(port, cap)
        got = subprocess.run(["curl", "-sS", "-k", "--tlsv1.2", "--tls-max", "1.2", "--ciphers",
                              suite, f"https://127.0.0.1:{port}/page.txt"],
                             capture_output=True, timeout=60, env=_env())  # fmt: skip
        time.sleep(0.5)  # the last segments reach the capture
        tcpdump.send_signal(signal.SIGTERM)
        tcpdump.wait(timeout=20)
    finally:
        server.terminate()
        server.wait(timeout=20)
    assert got.returncode == 0 and got.stdout == BODY, got.stderr
    assert keys.read_text().startswith("CLIENT_RANDOM ")
    tls = ["-r", str(cap), "-d", f"tcp.port=={port},tls"]  # not 443: say it is TLS
    fields = ["-T", "fields", "-e", "http.request.uri", "-e", "http.response.code"]
    decrypted = _tshark(*tls, "-o", f"tls.keylog_file:{keys}", "-Y", "http", *fields)
    assert decrypted.split() == ["/page.txt", "200"], decrypted
    stream = _tshark(*tls, "-o", f"tls.keylog_file:{keys}", "-q", "-z", "follow,tls,ascii,0")
    assert "GET /page.txt HTTP/1.1" in stream
    assert "line 00199 of a page tshark must show decrypted" in stream
    # the negative control: the same capture without the key log shows no HTTP
    assert _tshark(*tls, "-Y", "http", *fields).strip() == ""
    assert _tshark(*tls, "-Y", "_ws.malformed").strip() == ""
