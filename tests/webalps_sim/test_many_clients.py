"""64 unmodified clients at once through one WebALPS host, in every suite the guardian serves.

curl (OpenSSL), Python's ``ssl``, ``gnutls-cli`` and Debian's ``wget`` (both GnuTLS) -- sixteen
of each, started together, each verifying the guardian's chain against the WebALPS CA and
offering exactly one suite; the suites rotate over :data:`WEBALPS_SUITES`, two of them ECDHE_RSA
(the guardian makes and signs the ephemeral key).  Every body must be byte-exact, and the host's
counters (``--stats-json``) must show the guardian made an ephemeral key for the ECDHE clients.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import threading
from collections import Counter
from pathlib import Path

import pytest

from tests.webalps_sim.guardian_helpers import (
    SUITE_NAMES,
    GuardianProcess,
    HostProcess,
    client_context,
    gnutls_priority,
    provision,
)
from tls12.suites import SUITES, KeyExchange
from webalps_sim.aio.host import WEBALPS_SUITES

pytestmark = pytest.mark.interop

CLIENTS = ("curl", "python", "gnutls-cli", "wget")
PER_KIND = 16
SIZE = 96 << 10


def _curl(port: int, ca: Path, suite: str) -> bytes:
    out = subprocess.run(["curl", "-sS", "--max-time", "120", "--tlsv1.2", "--tls-max", "1.2",
                          "--ciphers", suite, "--cacert", str(ca), f"https://localhost:{port}/f"],
                         capture_output=True, timeout=180, check=True)
    return out.stdout


def _python(port: int, ca: Path, suite: str) -> bytes:
    import http.client

    conn = http.client.HTTPSConnection("localhost", port, context=client_context(ca, suite),
                                       timeout=120)
    conn.request("GET", "/f")
    body = conn.getresponse().read()
    conn.close()
    return body


def _gnutls(port: int, ca: Path, suite: str) -> bytes:
    """gnutls-cli ends the connection when its input ends: keep stdin open until the host,
    which closes an HTTP/1.0 connection after the response, has sent everything."""
    proc = subprocess.Popen(["gnutls-cli", "--x509cafile", str(ca), "--logfile", "/dev/null",
                             "--priority", gnutls_priority(suite), "-p", str(port), "localhost"],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert proc.stdin is not None and proc.stdout is not None
    timer = threading.Timer(180, proc.kill)
    timer.start()
    try:
        proc.stdin.write(b"GET /f HTTP/1.0\r\nHost: localhost\r\n\r\n")
        proc.stdin.flush()
        output = proc.stdout.read()
        proc.stdin.close()
        err = proc.stderr.read() if proc.stderr is not None else b""
        proc.wait(30)
    finally:
        timer.cancel()
    head, _, body = output.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 200"), (proc.returncode, err[-300:])
    return body


def _wget(port: int, ca: Path, suite: str) -> bytes:
    out = subprocess.run(["wget", "-q", "-O", "-", f"--ca-certificate={ca}",
                          f"--ciphers={gnutls_priority(suite)}", f"https://localhost:{port}/f"],
                         capture_output=True, timeout=180, check=True)
    return out.stdout


FETCH = {"curl": _curl, "python": _python, "gnutls-cli": _gnutls, "wget": _wget}


def test_64_concurrent_clients_in_every_suite(tmp_path: Path) -> None:
    prov = provision(tmp_path)
    docroot = tmp_path / "www"
    docroot.mkdir()
    body = os.urandom(SIZE)
    (docroot / "f").write_bytes(body)
    sock = tmp_path / "guardian.sock"
    stats = tmp_path / "host-stats.json"
    names = [SUITE_NAMES[s] for s in WEBALPS_SUITES]
    assert sum(SUITES[s].key_exchange is KeyExchange.ECDHE_RSA for s in WEBALPS_SUITES) >= 2
    jobs = [(kind, names[(i + k) % len(names)]) for k, kind in enumerate(CLIENTS)
            for i in range(PER_KIND)]
    results: dict[int, object] = {}
    start = threading.Barrier(len(jobs))

    def run(n: int, kind: str, suite: str, port: int) -> None:
        start.wait(60)
        try:
            results[n] = FETCH[kind](port, prov.ca_pem, suite)
        except Exception as exc:  # noqa: BLE001 - reported below, per client
            results[n] = exc

    with GuardianProcess(prov.state_dir, sock), \
            HostProcess(docroot, sock, "--stats-json", str(stats)) as host:
        threads = [threading.Thread(target=run, args=(n, kind, suite, host.port))
                   for n, (kind, suite) in enumerate(jobs)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(300)
        assert host.alive
    want = hashlib.sha256(body).hexdigest()
    bad = {jobs[n]: (r if isinstance(r, Exception) else len(r))  # type: ignore[arg-type]
           for n, r in results.items()
           if isinstance(r, Exception) or hashlib.sha256(r).hexdigest() != want}  # type: ignore[arg-type]
    assert len(results) == len(jobs) == 64 and not bad, bad
    assert Counter(suite for _, suite in jobs).keys() == set(names)  # every suite was offered
    counters = json.loads(stats.read_text())
    ecdhe = sum(1 for _, suite in jobs if suite.startswith("ECDHE"))
    assert counters["https"]["requests"] >= 64
    assert counters["https"]["handshakes"] == 64 <= counters["https"]["connections"]
    assert counters["guardian"]["questions"]["ephemeral"] == ecdhe
