"""Application data in place of the client's Finished gets a fatal ``unexpected_message``.

Issue 21, second defect: a client that sends application data after its ClientKeyExchange and
ChangeCipherSpec, where its Finished belongs, got only a bare TCP close from
``webalps_sim.host --mode webalps`` (the host asked the guardian to open the record; the guardian
refused, as it must before the Finished is checked).  RFC 5246 wants a fatal
``unexpected_message``, which ``--mode https`` and the plain ``tls12`` server send.  The host now
judges the record's content type by its transition table before it asks the guardian anything.
The reference in the same test is the host in ``--mode https``.
"""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from tests.webalps_sim.guardian_helpers import GuardianProcess, HostProcess, provision
from tls12.client_connection import ClientConnection
from tls12.config import ClientConfig
from tls12.errors import AlertDescription
from tls12.record import ContentType, OutgoingRecord, split_records
from tls12.suites import CipherSuite
from webalps_sim.aio.host import WEBALPS_SUITES

pytestmark = pytest.mark.interop


def _skip_finished(port: int, suite: int) -> bytes:
    """Handshake up to the client's second flight, send its Finished record relabelled as
    application data, and return every byte the server sends back until it closes."""
    client = ClientConnection(ClientConfig(cipher_suites=(CipherSuite(suite),)))
    with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
        sock.sendall(client.data_to_send())
        while not (flight := client.data_to_send()):
            data = sock.recv(65536)
            assert data, "closed during the server's first flight"
            client.receive_data(data)
        ends = split_records(flight)
        assert ends is not None and len(ends) == 3  # ClientKeyExchange, CCS, Finished
        # a well-formed application-data record, sealed with the client's keys at the
        # Finished's sequence number (0 of the new epoch), where the Finished belongs
        early = client.write_protection.seal(
            OutgoingRecord(ContentType.APPLICATION_DATA, 0x0303, 0, b"GET / HTTP/1.1\r\n\r\n"))
        sock.sendall(flight[: ends[1]] + early)
        answer = b""
        while chunk := sock.recv(65536):
            answer += chunk
        return answer


@pytest.mark.parametrize("suite", [WEBALPS_SUITES[0], WEBALPS_SUITES[-1]], ids=["rsa", "ecdhe"])
def test_skipped_finished_gets_unexpected_message(tmp_path: Path, suite: int) -> None:
    prov = provision(tmp_path)
    docroot = tmp_path / "www"
    docroot.mkdir()
    sock = tmp_path / "guardian.sock"
    alert = b"\x15\x03\x03\x00\x02\x02" + bytes((AlertDescription.UNEXPECTED_MESSAGE,))
    with GuardianProcess(prov.state_dir, sock), HostProcess(docroot, sock) as host:
        assert _skip_finished(host.port, suite) == alert
        assert host.alive
        https = HostProcess(docroot, sock)
        https.cmd = [*https.cmd[:4], "https", *[a for a in https.cmd[5:]
                                                if a not in ("--guardian", str(sock))]]
        with https:
            assert _skip_finished(https.port, suite) == alert  # the reference server agrees
