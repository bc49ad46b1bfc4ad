"""A guardian killed mid-request: that client gets an error, the host reconnects, later requests work.

The guardian (a child process) is killed with SIGKILL while the host streams a 16 MiB response
whose records the guardian seals.  The client must not receive the whole body (the host cannot
seal another record, so the TLS connection ends early, without close_notify).  While the
guardian is down a new client gets the host's ``internal_error`` alert in its handshake.  After a
restart with the same state directory (same key, same certificate) the host reconnects on the
next handshake -- a new guardian run, so no old key handle is valid -- and fetches are
byte-exact again.
"""

from __future__ import annotations

import os
import socket
import ssl
from pathlib import Path

import pytest

from tests.webalps_sim.guardian_helpers import (
    SUITE_NAMES,
    GuardianProcess,
    client_context,
    provision,
    python_get,
    webalps_host,
)
from webalps_sim.aio.host import WEBALPS_SUITES

pytestmark = pytest.mark.interop

CIPHER = SUITE_NAMES[WEBALPS_SUITES[0]]


def _read_until_end(tls: ssl.SSLSocket) -> tuple[bytes, BaseException | None]:
    got = bytearray()
    try:
        while chunk := tls.recv(1 << 16):
            got += chunk
    except (ssl.SSLError, OSError) as exc:
        return bytes(got), exc
    return bytes(got), None


def test_guardian_killed_mid_request(tmp_path: Path) -> None:
    prov = provision(tmp_path)
    docroot = tmp_path / "www"
    docroot.mkdir()
    big = os.urandom(16 << 20)
    (docroot / "big").write_bytes(big)
    (docroot / "small").write_bytes(b"after the restart\n")
    sock = tmp_path / "guardian.sock"
    guardian = GuardianProcess(prov.state_dir, sock).start()
    server, remote = webalps_host(docroot, sock)
    try:
        with server:
            ctx = client_context(prov.ca_pem, CIPHER)
            with socket.create_connection(("127.0.0.1", server.port), timeout=60) as raw, \
                    ctx.wrap_socket(raw, server_hostname="localhost") as tls:
                tls.sendall(b"GET /big HTTP/1.1\r\nHost: localhost\r\n\r\n")
                first = tls.recv(1 << 16)
                assert first.startswith(b"HTTP/1.1 200 OK")
                guardian.kill()  # mid-response: most of the 16 MiB is not sealed yet
                rest, error = _read_until_end(tls)
            received = len(first) + len(rest)
            assert received < len(big), "the whole body arrived although the guardian died"
            assert error is not None or not rest.endswith(big[-1000:])

            # while the guardian is down: the handshake fails with the host's alert
            with pytest.raises(ssl.SSLError, match="INTERNAL_ERROR|internal error"):
                python_get(server.port, "/small", prov.ca_pem, CIPHER)

            guardian = GuardianProcess(prov.state_dir, sock).start()
            status, headers, body = python_get(server.port, "/small", prov.ca_pem, CIPHER)
            assert (status, body) == (200, b"after the restart\n")
            _, _, body = python_get(server.port, "/big", prov.ca_pem, CIPHER)
            assert body == big
            assert remote.reconnects >= 1
    finally:
        guardian.stop()
        remote.close()
