"""A stopped guardian stalls only the connections that wait for it (issue 21, first defect).

The host and the guardian run as their own processes, as deployed; the guardian is frozen with
SIGSTOP for 5 s while clients wait on it:

* a client in the middle of its handshake (its ClientKeyExchange needs the guardian) and a
  client with an established connection that sends a request (its record needs the guardian)
  both wait -- and are answered, byte-exact, as soon as the guardian resumes;
* meanwhile a new client gets the ServerHello flight of an RSA suite at once (the host needs the
  guardian only from the ClientKeyExchange on);
* and plain HTTP from the same host process (``--http-port``) is answered within 50 ms
  throughout.

Before the event-driven seam the host called the guardian from its event loop, and the new
client got no ServerHello within 3 s.
"""

from __future__ import annotations

import hashlib
import http.client
import os
import signal
import socket
import ssl
import threading
import time
from pathlib import Path

import pytest

from tests.webalps_sim.guardian_helpers import (
    SUITE_NAMES,
    GuardianProcess,
    HostProcess,
    client_context,
    provision,
)
from tls12.client_connection import ClientConnection
from tls12.config import ClientConfig
from tls12.suites import CipherSuite
from webalps_sim.aio.host import WEBALPS_SUITES

pytestmark = pytest.mark.interop

FREEZE = 5.0
RSA_SUITE = WEBALPS_SUITES[0]


def _https_get(port: int, ctx: ssl.SSLContext, path: str, out: dict[str, object]) -> None:
    """One request on a new connection (handshake included); the body or the error in ``out``."""
    try:
        conn = http.client.HTTPSConnection("localhost", port, context=ctx, timeout=60)
        conn.request("GET", path)
        out["body"] = conn.getresponse().read()
        out["at"] = time.monotonic()
        conn.close()
    except Exception as exc:  # noqa: BLE001 - the test reports what went wrong
        out["error"] = repr(exc)


def _first_flight_delay(port: int) -> float:
    """Seconds from a ClientHello to the whole ServerHello flight (ServerHelloDone read)."""
    client = ClientConnection(ClientConfig(cipher_suites=(CipherSuite(RSA_SUITE),)))
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        start = time.monotonic()
        sock.sendall(client.data_to_send())
        while client.data_to_send() == b"" and not client.closed:
            data = sock.recv(65536)
            assert data, "the host closed the connection"
            client.receive_data(data)
            if client.state.value == "expect_change_cipher_spec":
                break  # ServerHelloDone handled: the client's flight is queued
        return time.monotonic() - start


def test_a_frozen_guardian_delays_only_its_waiting_clients(tmp_path: Path) -> None:
    prov = provision(tmp_path)
    docroot = tmp_path / "www"
    docroot.mkdir()
    body = os.urandom(256 << 10)
    (docroot / "f").write_bytes(body)
    sock = tmp_path / "guardian.sock"
    ctx = client_context(prov.ca_pem, SUITE_NAMES[RSA_SUITE])
    with GuardianProcess(prov.state_dir, sock) as guardian, HostProcess(docroot, sock) as host:
        assert guardian.proc is not None
        # an established connection that will send its request while the guardian is stopped
        kept = http.client.HTTPSConnection("localhost", host.port, context=ctx, timeout=60)
        kept.request("GET", "/f")
        assert kept.getresponse().read() == body
        plain = http.client.HTTPConnection("127.0.0.1", host.http_port, timeout=10)
        plain.request("GET", "/f")
        assert plain.getresponse().read() == body  # warm: same process, plain HTTP

        os.kill(guardian.proc.pid, signal.SIGSTOP)
        stopped_at = time.monotonic()
        try:
            waiting: dict[str, object] = {}
            handshaking = threading.Thread(target=_https_get, args=(host.port, ctx, "/f", waiting))
            handshaking.start()
            kept_out: dict[str, object] = {}

            def kept_request() -> None:
                try:
                    kept.request("GET", "/f")
                    kept_out["body"] = kept.getresponse().read()
                    kept_out["at"] = time.monotonic()
                except Exception as exc:  # noqa: BLE001
                    kept_out["error"] = repr(exc)

            established = threading.Thread(target=kept_request)
            established.start()
            time.sleep(0.3)
            delays = [_first_flight_delay(host.port) for _ in range(3)]
            latencies = []
            while time.monotonic() - stopped_at < FREEZE:
                t0 = time.monotonic()
                plain.request("GET", "/f")
                assert plain.getresponse().read() == body
                latencies.append(time.monotonic() - t0)
                time.sleep(0.05)
            assert not waiting and not kept_out, "answered while the guardian was stopped"
        finally:
            os.kill(guardian.proc.pid, signal.SIGCONT)
        resumed_at = time.monotonic()
        handshaking.join(60)
        established.join(60)
        assert host.alive
    assert max(delays) < 0.5, delays  # the ServerHello flight at once
    assert len(latencies) >= 20 and max(latencies) < 0.050, sorted(latencies)[-5:]
    for out in (waiting, kept_out):
        assert "error" not in out, out
        assert hashlib.sha256(out["body"]).digest() == hashlib.sha256(body).digest()  # type: ignore[arg-type]
        assert out["at"] - resumed_at < 5.0  # type: ignore[operator]  # as soon as it resumes


def test_a_question_past_its_time_limit_ends_only_its_connection(tmp_path: Path) -> None:
    """``--guardian-timeout 1``: with the guardian stopped, a client in its handshake gets a
    fatal ``internal_error`` (in the clear: the host has not sent its ChangeCipherSpec) after
    about a second; plain HTTP is served meanwhile; once the guardian resumes, new clients
    are served by the same host process."""
    prov = provision(tmp_path)
    docroot = tmp_path / "www"
    docroot.mkdir()
    (docroot / "f").write_bytes(b"x" * 2048)
    sock = tmp_path / "guardian.sock"
    ctx = client_context(prov.ca_pem, SUITE_NAMES[RSA_SUITE])
    with GuardianProcess(prov.state_dir, sock) as guardian, \
            HostProcess(docroot, sock, "--guardian-timeout", "1") as host:
        assert guardian.proc is not None
        client = ClientConnection(ClientConfig(cipher_suites=(CipherSuite(RSA_SUITE),)))
        os.kill(guardian.proc.pid, signal.SIGSTOP)
        try:
            with socket.create_connection(("127.0.0.1", host.port), timeout=10) as raw:
                raw.sendall(client.data_to_send())
                while not (flight := client.data_to_send()):
                    client.receive_data(raw.recv(65536))
                raw.sendall(flight)  # ClientKeyExchange: now the host needs the guardian
                sent = time.monotonic()
                answer = b""
                while chunk := raw.recv(65536):
                    answer += chunk
                waited = time.monotonic() - sent
            plain = http.client.HTTPConnection("127.0.0.1", host.http_port, timeout=5)
            plain.request("GET", "/f")
            assert plain.getresponse().read() == b"x" * 2048
        finally:
            os.kill(guardian.proc.pid, signal.SIGCONT)
        out: dict[str, object] = {}
        _https_get(host.port, ctx, "/f", out)
        assert host.alive
    assert answer == b"\x15\x03\x03\x00\x02\x02\x50"  # fatal internal_error (80)
    assert 0.9 < waited < 5.0, waited
    assert out.get("body") == b"x" * 2048, out
