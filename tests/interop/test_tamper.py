"""Tampering on the wire makes unmodified clients fail closed.

A relay between the client and our server (see :class:`tls_peers.Relay`)

* flips one bit inside the first application-data record the server sends:
  curl must exit non-zero naming a bad record MAC / decryption failure and
  Python's ``ssl`` must raise ``SSLError`` with reason
  ``DECRYPTION_FAILED_OR_BAD_RECORD_MAC``, for a NULL suite (integrity only)
  and for AES-CBC suites;
* cuts the connection in the middle of a record of the body: whatever the
  client got must be a prefix of the file made of *whole authenticated
  records* only, and the client must report the truncation (no
  close_notify) instead of a complete download.
"""

from __future__ import annotations

import http.client
import socket
import ssl
from pathlib import Path

import pytest

from testbed.apps.harness import BackgroundServer
from tests.interop.tls_peers import (
    MIB,
    Relay,
    curl,
    cut_after_app_records,
    flip_first_app_record,
    python_ssl_context,
    python_ssl_get,
    suite_id,
    wait_for_record,
)
from tls12.errors import AlertDescription
from tls12.suites import CipherSuite

pytestmark = pytest.mark.interop

TAMPER_SUITES = [
    CipherSuite.TLS_RSA_WITH_NULL_SHA,
    CipherSuite.TLS_RSA_WITH_AES_128_CBC_SHA,
    CipherSuite.TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA256,
]
FILE = f"/file_{MIB}.bin"
RECORD = 16384


# How OpenSSL 3 words a failed record check: the TLS-level reason, or for CBC
# suites the provider error that comes first in the error queue.
CURL_MAC_ERRORS = ("bad record mac", "decryption failed", "cipher operation failed")


@pytest.mark.parametrize("suite", TAMPER_SUITES, ids=suite_id)
def test_flipped_record_makes_curl_fail(https_server: BackgroundServer, tmp_path: Path, suite: CipherSuite) -> None:
    record_filter, hits = flip_first_app_record()
    before = https_server.wait_idle()
    with Relay(https_server.port, record_filter) as relay:
        proc = curl(f"https://127.0.0.1:{relay.port}{FILE}", suite, tmp_path / "out.bin", timeout=60)
        record = wait_for_record(https_server, before)
    assert not relay.errors
    assert hits, "the relay saw no application-data record"
    assert proc.returncode != 0
    assert any(m in proc.stderr.lower() for m in CURL_MAC_ERRORS), proc.stderr
    # curl's OpenSSL told our server why, through the relay: a fatal bad_record_mac alert
    assert AlertDescription.BAD_RECORD_MAC in record.alerts_received, record
    # the response head was in the flipped record: nothing may have been written
    out = tmp_path / "out.bin"
    assert not out.exists() or out.stat().st_size == 0


@pytest.mark.parametrize("offset", [0.0, 0.5, 0.999], ids=["first-byte", "middle", "last-byte"])
@pytest.mark.parametrize("suite", TAMPER_SUITES, ids=suite_id)
def test_flipped_record_makes_python_ssl_fail(https_server: BackgroundServer, suite: CipherSuite, offset: float) -> None:
    """Any flipped position -- IV, payload, MAC or padding -- gives the same single error."""
    record_filter, hits = flip_first_app_record(offset)
    with Relay(https_server.port, record_filter) as relay:
        with pytest.raises(ssl.SSLError) as info:
            python_ssl_get(relay.port, FILE, suite, timeout=60)
    assert not relay.errors
    assert hits
    assert info.value.reason == "DECRYPTION_FAILED_OR_BAD_RECORD_MAC", repr(info.value)
    assert "bad record mac" in str(info.value).lower()


def _raw_python_ssl_download(port: int, suite: CipherSuite) -> tuple[bytes, BaseException | None]:
    """GET over a plain ``ssl`` socket that reports a missing close_notify as an error.

    ``suppress_ragged_eofs=False`` makes ``recv`` raise ``SSLEOFError`` on a
    TCP EOF without close_notify instead of returning ``b""`` (the default,
    which leaves truncation detection to the HTTP layer -- checked separately
    through ``http.client``).  Returns everything received and the error.
    """
    received = bytearray()
    error: BaseException | None = None
    ctx = python_ssl_context(suite)
    with socket.create_connection(("127.0.0.1", port), timeout=30) as raw:
        with ctx.wrap_socket(raw, suppress_ragged_eofs=False) as tls:
            tls.sendall(f"GET {FILE} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n".encode())
            try:
                while data := tls.recv(65536):
                    received += data
            except (ssl.SSLError, OSError) as exc:
                error = exc
    return bytes(received), error


FULL_RECORDS = 9
"""Application-data records forwarded whole: the response head shares the first with the body (coalescing)."""


@pytest.mark.parametrize("suite", TAMPER_SUITES, ids=suite_id)
def test_truncated_stream_yields_only_authenticated_prefix_python_ssl(
    https_server: BackgroundServer, docroot: tuple[Path, dict[int, bytes]], suite: CipherSuite
) -> None:
    record_filter, seen = cut_after_app_records(FULL_RECORDS)
    with Relay(https_server.port, record_filter) as relay:
        received, error = _raw_python_ssl_download(relay.port, suite)
    assert not relay.errors
    assert len(seen) == FULL_RECORDS + 1
    head, sep, body = received.partition(b"\r\n\r\n")
    assert sep and head.startswith(b"HTTP/1.1 200")
    assert body == docroot[1][MIB][: len(body)], "received bytes are not a prefix of the file"
    assert len(head + sep) + len(body) == FULL_RECORDS * RECORD, "only whole authenticated records may be delivered"
    assert isinstance(error, ssl.SSLEOFError), f"truncation not reported as SSLEOFError: {error!r}"


@pytest.mark.parametrize("suite", TAMPER_SUITES, ids=suite_id)
def test_truncated_stream_is_an_incomplete_read_for_http_client(
    https_server: BackgroundServer, docroot: tuple[Path, dict[int, bytes]], suite: CipherSuite
) -> None:
    """With Python's defaults, http.client sees the short body against Content-Length."""
    record_filter, _ = cut_after_app_records(FULL_RECORDS)
    with Relay(https_server.port, record_filter) as relay:
        with pytest.raises(http.client.IncompleteRead) as info:
            python_ssl_get(relay.port, FILE, suite, timeout=60)
    partial = info.value.partial
    assert (FULL_RECORDS - 1) * RECORD < len(partial) < FULL_RECORDS * RECORD  # the head fills the rest
    assert partial == docroot[1][MIB][: len(partial)]


@pytest.mark.parametrize("suite", TAMPER_SUITES, ids=suite_id)
def test_truncated_stream_makes_curl_fail_with_prefix(
    https_server: BackgroundServer, docroot: tuple[Path, dict[int, bytes]], tmp_path: Path, suite: CipherSuite
) -> None:
    record_filter, seen = cut_after_app_records(20)
    out = tmp_path / "out.bin"
    with Relay(https_server.port, record_filter) as relay:
        proc = curl(f"https://127.0.0.1:{relay.port}{FILE}", suite, out, timeout=60)
    assert not relay.errors
    assert proc.returncode != 0, "curl accepted a truncated download"
    body = out.read_bytes() if out.exists() else b""
    assert len(body) < MIB
    assert body == docroot[1][MIB][: len(body)], "received bytes are not a prefix of the file"
    assert len(body) < 20 * RECORD  # the head shares the first of the 20 records


def test_untampered_relay_passes_everything(https_server: BackgroundServer, docroot: tuple[Path, dict[int, bytes]]) -> None:
    """Control: the same relay without tampering yields the exact file."""
    with Relay(https_server.port, lambda ct, record: (record, True)) as relay:
        status, body, _ = python_ssl_get(relay.port, FILE, CipherSuite.TLS_RSA_WITH_AES_128_CBC_SHA, timeout=60)
    assert status == 200
    assert body == docroot[1][MIB]
